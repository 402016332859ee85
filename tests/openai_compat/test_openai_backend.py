"""OpenAI in, OpenAI out: kith's ``/v1`` in front of an OpenAI-compatible model server (the ``openai``
provider against the fake server), driven by the official client; usage is the model's own count."""

from __future__ import annotations

import json

from gateway.testing import GatewayFactory
from tests.fakes.openai_server import API_KEY, FakeOpenAI
from tests.openai_compat.conftest import client, person


async def test_kith_between_two_openai_speakers(kith_gateway: GatewayFactory) -> None:
    async with FakeOpenAI() as backend:
        gw = await kith_gateway(llm={"provider": "openai", "api_key": API_KEY, "base_url": backend.url,
                                     "model": "fake-gpt", "max_retries": 0})  # fmt: skip
        api = client(gw, person(gw, "ada", "Ada"))
        backend.enqueue("The recycling goes out on Thursdays.")
        stream = await api.chat.completions.create(
            model="kith", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "which day is recycling?"}],
        )  # type: ignore[call-overload]
        chunks = [c async for c in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text.startswith("The recycling goes out on Thursdays.")
        asked = "which day is recycling?"
        turn = next(r for r in reversed(backend.requests) if r["messages"][-1].get("content") == asked)
        # kith's own prompt went to the model (its persona and memory), not the client's messages alone.
        assert turn["messages"][0]["role"] == "system" and turn["model"] == "fake-gpt"
        # The usage chunk carries the model server's own count for the turn, not an estimate.
        usage = chunks[-1].usage
        assert usage is not None
        assert usage.prompt_tokens == sum(len(json.dumps(m)) // 4 for m in turn["messages"])
        assert usage.completion_tokens == len("The recycling goes out on Thursdays.") // 4 + 1
