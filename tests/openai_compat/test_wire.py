"""``/v1`` on the wire: an Open WebUI-style raw request (its JSON and headers, SSE read line by line),
and the refusals in OpenAI's error shape: 400 bad body, 404 unknown model, 429 over a limit."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest

from gateway.app import Gateway
from tests.fakes.anthropic import FakeAnthropic
from tests.openai_compat.conftest import Start, client, person, turn_texts

# What Open WebUI sends to an OpenAI connection: its own system prompt and the whole chat, its model
# parameters, streaming with usage, and (with ENABLE_FORWARD_USER_INFO_HEADERS) who and which chat.
OPEN_WEBUI_BODY: dict[str, Any] = {
    "model": "kith",
    "messages": [
        {"role": "system", "content": "You are a helpful assistant. Current date: 2026-11-24"},
        {"role": "user", "content": "What should I call the cat?"},
        {"role": "assistant", "content": "How about Miso?"},
        {"role": "user", "content": [{"type": "text", "text": "Miso it is. Remember the cat is called Miso.",
                                      "cache_control": {"type": "ephemeral"}}]},
    ],
    "stream": True,
    "stream_options": {"include_usage": True},
    "temperature": 0.7,
    "top_p": 0.9,
    "max_tokens": 1024,
    "user": {"name": "Ada", "id": "3f1c", "email": "ada@example.org", "role": "user"},  # as for pipelines
}
OPEN_WEBUI_HEADERS = {"X-OpenWebUI-User-Name": "Ada", "X-OpenWebUI-User-Id": "3f1c", "X-OpenWebUI-User-Role": "user",
                      "X-OpenWebUI-Chat-Id": "6c1a0f1e-9b7d-4f3e-a1d2-0c8b7e5f4a31"}  # fmt: skip


async def _events(resp: aiohttp.ClientResponse) -> list[str]:
    """The ``data:`` payloads of an SSE answer, read line by line as Open WebUI reads them."""
    out = []
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data: "):
            out.append(line[6:])
        else:
            assert line == "", line  # nothing but data lines and the blank lines between events
    return out


async def test_an_open_webui_request_works_unchanged(start: Start, fake_anthropic: FakeAnthropic) -> None:
    gw = await start()
    key = person(gw, "ada", "Ada")
    fake_anthropic.enqueue("Miso is a lovely name; I will remember it.")
    headers = {"Authorization": f"Bearer {key}", **OPEN_WEBUI_HEADERS}
    async with aiohttp.ClientSession() as http, http.post(
        f"http://127.0.0.1:{gw.port}/v1/chat/completions", json=OPEN_WEBUI_BODY, headers=headers
    ) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        events = await _events(resp)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.startswith("Miso is a lovely name; I will remember it.")
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    # The turn is the newest user message only; Open WebUI's system prompt and its copy of the chat are
    # not what the model reads as instructions or history.
    said = turn_texts(fake_anthropic)
    assert "Miso it is. Remember the cat is called Miso." in said
    assert "You are a helpful assistant" not in said and "How about Miso?" not in said
    # Open WebUI's chat id named the conversation (per key).
    keys = gw.state.api_keys.of_user("ada")
    conversation = gw.state.conversations.get(f"openai:{keys[0].key_id}:{OPEN_WEBUI_HEADERS['X-OpenWebUI-Chat-Id']}")
    assert conversation is not None and conversation.user_id == "ada"


async def _post(port: int, key: str, body: Any, *, raw: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:  # fmt: skip
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **(headers or {})}
    data = raw if raw is not None else json.dumps(body)
    async with aiohttp.ClientSession() as http, http.post(
        f"http://127.0.0.1:{port}/v1/chat/completions", data=data, headers=headers
    ) as resp:
        return resp.status, await resp.json()


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "kith"}, "messages"),
    ({"model": "kith", "messages": []}, "messages"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
    ({"model": "kith", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
     "messages"),
    ({"model": "kith", "messages": [{"role": "user", "content": "   "}]}, "messages"),
    ({"model": "kith", "messages": [{"role": "user", "content": {"text": "hi"}}]}, "messages"),
    ({"model": "kith", "messages": [{"role": "user", "content": "hi"}], "n": 2}, "n"),
    ({"model": "kith", "messages": [{"role": "user", "content": "x" * 32_001}]}, "messages"),
])  # fmt: skip
async def test_a_bad_body_is_400_in_openais_shape(start: Start, body: dict[str, Any], param: str) -> None:
    gw = await start()
    status, answer = await _post(gw.port or 0, person(gw, "ada", "Ada"), body)
    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error" and answer["error"]["param"] == param
    assert gw.state.turns.last_seq() == 0


async def test_bad_json_is_400_and_an_unknown_model_404(start: Start) -> None:
    gw = await start()
    key = person(gw, "ada", "Ada")
    status, answer = await _post(gw.port or 0, key, None, raw=b'{"model": "kith", "messages": [')
    assert status == 400 and "JSON" in answer["error"]["message"]
    with pytest.raises(openai.NotFoundError) as caught:
        await client(gw, key).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        await client(gw, key).models.retrieve("gpt-4o")
    assert (await client(gw, key).models.retrieve("kith")).id == "kith"


async def test_over_the_limit_is_429(start: Start, fake_anthropic: FakeAnthropic) -> None:
    gw = await start(server={"port": 0, "rate_limit": {"messages_per_minute": 1, "burst": 2}},
                     personas={"channels": {"nextcloud": "developer"}})  # fmt: skip
    api = client(gw, person(gw, "ada", "Ada"))
    other = client(gw, person(gw, "bob", "Bob"))
    hi = [{"role": "user", "content": "hi"}]
    for _ in range(2):
        await api.chat.completions.create(model="kith", messages=hi)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as caught:
        await api.chat.completions.create(model="developer", messages=hi)  # type: ignore[arg-type]
    assert caught.value.status_code == 429
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "rate_limit_exceeded"
    key_id = gw.state.api_keys.of_user("ada")[0].key_id
    assert gw.state.persona_choices.chosen("ada", f"openai:{key_id}") is None  # a refused request changes nothing
    await other.chat.completions.create(model="kith", messages=hi)  # type: ignore[arg-type]  # per person


async def test_a_cross_site_page_is_refused_by_the_guard(start: Start) -> None:
    gw = await start()
    key = person(gw, "ada", "Ada")
    headers = {"Authorization": f"Bearer {key}", "Origin": "https://evil.example"}
    async with aiohttp.ClientSession() as http, http.post(
        f"http://127.0.0.1:{gw.port}/v1/chat/completions", json=OPEN_WEBUI_BODY, headers=headers
    ) as resp:
        assert resp.status == 403
    assert gw.state.turns.last_seq() == 0


async def test_a_body_over_the_servers_limit_is_413_in_openais_shape(start: Start) -> None:
    gw = await start()
    history = [{"role": "user", "content": "x" * 30_000}, {"role": "assistant", "content": "y" * 30_000}] * 20
    status, answer = await _post(gw.port or 0, person(gw, "ada", "Ada"),
                                 {"model": "kith", "messages": [*history, {"role": "user", "content": "hi"}]})
    assert status == 413 and "too large" in answer["error"]["message"]
    assert gw.state.turns.last_seq() == 0


async def test_the_user_field_names_a_conversation_whatever_its_text(start: Start) -> None:
    gw = await start()
    api = client(gw, person(gw, "ada", "Ada"))
    key_id = gw.state.api_keys.of_user("ada")[0].key_id
    hi = [{"role": "user", "content": "hi"}]
    for user in ("ada@example.org", "Ada Lovelace / laptop", "Ada Lovelace / laptop"):
        await api.chat.completions.create(model="kith", messages=hi, user=user)  # type: ignore[arg-type]
    keys = _conversation_keys(gw, "ada")
    assert f"openai:{key_id}:ada@example.org" in keys
    hashed = [k for k in keys if k.startswith(f"openai:{key_id}:user-")]
    assert len(hashed) == 1 and "Lovelace" not in hashed[0]  # the same text, the same conversation
    # kith's own header is checked strictly.
    status, answer = await _post(gw.port or 0, person(gw, "ada", "Ada"), {"model": "kith", "messages": hi},
                                 headers={"X-Kith-Conversation": "bad name/../x"})
    assert status == 400 and "X-Kith-Conversation" in answer["error"]["message"]


def _conversation_keys(gw: Gateway, user_id: str) -> set[str]:
    return {row["conversation_key"] for row in gw.state.people.rows(user_id).get("conversations", [])}


async def test_beyond_loopback_a_public_name_works_with_a_key(start: Start, fake_anthropic: FakeAnthropic) -> None:
    gw = await start(server={"port": 0, "public_names": ["kith.example.org"]})
    key = person(gw, "ada", "Ada")
    body = {"model": "kith", "messages": [{"role": "user", "content": "hello from afar"}]}
    url = f"http://127.0.0.1:{gw.port}/v1/chat/completions"
    async with aiohttp.ClientSession() as http:
        for host, auth, expected in (("kith.example.org", key, 200), ("kith.example.org", "", 401),
                                     ("other.example.org", key, 421)):  # fmt: skip
            headers = {"Host": host, **({"Authorization": f"Bearer {auth}"} if auth else {})}
            async with http.post(url, json=body, headers=headers) as resp:
                assert resp.status == expected, (host, bool(auth), resp.status)
                if expected == 200:
                    assert (await resp.json())["choices"][0]["message"]["content"]
