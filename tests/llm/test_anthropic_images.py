"""Images reach the Anthropic Messages API as base64 image blocks (the real SDK, the fake server)."""

from __future__ import annotations

import base64

from gateway.configread import parse_config
from gateway.llm.anthropic import AnthropicProvider
from gateway.types import HistoryMessage, ImagePart, LLMRequest
from tests.fakes.anthropic import API_KEY, FakeAnthropic

JPEG = b"\xff\xd8\xff\xe0" + b"\x01" * 32


def provider(fake: FakeAnthropic, **llm: object) -> AnthropicProvider:
    cfg = parse_config({"llm": {"api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0, **llm}}, env={})
    return AnthropicProvider(cfg.llm)


async def test_image_blocks_come_before_the_text(fake_anthropic: FakeAnthropic) -> None:
    p = provider(fake_anthropic)
    history = (HistoryMessage(role="user", content="earlier"), HistoryMessage(role="assistant", content="ok"),
               HistoryMessage(role="user", content="", images=(ImagePart(mime_type="image/jpeg", data=JPEG),)),
               HistoryMessage(role="user", content="what is in the photo?"))
    await p.complete(LLMRequest(system=(), messages=history), [].append)
    await p.close()
    last = fake_anthropic.requests[-1]["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][0] == {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                                              "data": base64.b64encode(JPEG).decode()}}
    assert last["content"][1] == {"type": "text", "text": "what is in the photo?"}


async def test_a_model_without_vision_gets_a_note(fake_anthropic: FakeAnthropic) -> None:
    p = provider(fake_anthropic, capabilities={"vision": False})
    image = ImagePart(mime_type="image/png", data=b"x", name="a.png")
    msg = HistoryMessage(role="user", content="look", images=(image,))
    await p.complete(LLMRequest(system=(), messages=(msg,)))
    await p.close()
    content = fake_anthropic.requests[-1]["messages"][-1]["content"]
    assert isinstance(content, str) and "a.png" in content and "cannot see images" in content
