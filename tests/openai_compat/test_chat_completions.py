"""``/v1/chat/completions`` through the official ``openai`` client: streaming and not, memory across
requests, usage, and the session a request lands in (docs/openai-api.md)."""

from __future__ import annotations

import asyncio
import base64

import aiohttp
import openai
import pytest

from gateway.testing import message
from tests.fakes.anthropic import FakeAnthropic
from tests.openai_compat.conftest import Start, client, person, turn_texts


async def test_the_openai_client_streams_a_reply_and_the_next_request_recalls_it(
    start: Start, fake_anthropic: FakeAnthropic
) -> None:
    gw = await start()
    key = person(gw, "ada", "Ada")
    api = client(gw, key)
    fake_anthropic.enqueue("Noted: your sister Ingrid lives in Bergen.")
    first = [{"role": "user", "content": "My sister Ingrid lives in Bergen."}]
    stream = await api.chat.completions.create(model="kith", messages=first, stream=True,  # type: ignore[arg-type]
                                               stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # The whole reply, streamed (a first-contact notice may follow the model's words).
    assert text.startswith("Noted: your sister Ingrid lives in Bergen.")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 2  # pieces as the model streamed
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"

    # The client sends the whole conversation again; kith takes the new last message as the turn and
    # answers from its own history (the fake model is sent what kith remembers).
    fake_anthropic.enqueue("She lives in Bergen.")
    again = [*first, {"role": "assistant", "content": text}, {"role": "user", "content": "Where does my sister live?"}]
    answer = await api.chat.completions.create(model="kith", messages=again)  # type: ignore[arg-type]
    assert (answer.choices[0].message.content or "").startswith("She lives in Bergen.")
    body = fake_anthropic.last_turn()
    said = [m["content"] if isinstance(m["content"], str) else " ".join(p.get("text", "") for p in m["content"])
            for m in body["messages"]]
    assert "Where does my sister live?" in said[-1]
    assert any("Ingrid lives in Bergen" in s for s in said[:-1])  # from kith's transcript, not the client's copy
    assert sum("Where does my sister live?" in s for s in said) == 1
    # Stored as Ada's turns on the openai channel, like any other channel's.
    await gw.settle()
    user = gw.identities.lookup("openai", "ada")
    assert user == "ada"
    session = gw.state.sessions.open_in("user:ada")
    assert session is not None
    rows = gw.state.turns.after(session.session_id)
    assert [r.content for r in rows if r.role == "user"] == ["My sister Ingrid lives in Bergen.",
                                                             "Where does my sister live?"]


async def test_non_streaming_answer_has_usage_and_names_the_session(
    start: Start, fake_anthropic: FakeAnthropic
) -> None:
    gw = await start()
    api = client(gw, person(gw, "ada", "Ada"))
    fake_anthropic.enqueue("Hello Ada.")
    raw = await api.chat.completions.with_raw_response.create(
        model="kith", messages=[{"role": "system", "content": "You are a pirate."},  # ignored: kith's persona speaks
                                   {"role": "user", "content": "Hi there"}])  # fmt: skip
    answer = raw.parse()
    assert answer.object == "chat.completion"
    assert (answer.choices[0].message.content or "").startswith("Hello Ada.")
    assert answer.choices[0].message.role == "assistant" and answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    session = gw.state.sessions.open_in("user:ada")
    assert session is not None and raw.headers["x-kith-session"] == session.session_id
    assert "pirate" not in turn_texts(fake_anthropic)


async def test_the_same_person_continues_across_channels(start: Start, fake_anthropic: FakeAnthropic) -> None:
    """The session is the person's own, as on every direct channel: the web chat's turn is history here."""
    gw = await start(identity_links=[{"user": "ada", "accounts": ["websocket:ada-browser"]}])
    api = client(gw, person(gw, "ada", "Ada"))
    await gw.handle_inbound(message("the spare key is under the blue pot", account="ada-browser"))
    fake_anthropic.enqueue("Under the blue pot.")
    answer = await api.chat.completions.create(model="kith",
                                               messages=[{"role": "user", "content": "where is the spare key?"}])
    assert (answer.choices[0].message.content or "").startswith("Under the blue pot.")
    assert "the spare key is under the blue pot" in turn_texts(fake_anthropic)


async def test_the_model_picks_the_persona_of_the_conversation(start: Start, fake_anthropic: FakeAnthropic) -> None:
    gw = await start(personas={"channels": {"nextcloud": "developer"}})  # two personas: kith, developer
    api = client(gw, person(gw, "ada", "Ada"))
    models = {m.id for m in (await api.models.list()).data}
    assert models == {"kith", "developer"}
    await api.chat.completions.create(model="developer", messages=[{"role": "user", "content": "hi"}],
                                      extra_headers={"X-Kith-Conversation": "work"})  # fmt: skip
    session = gw.state.sessions.open_in("user:ada")
    assert session is not None and session.persona == "developer"
    keys = gw.state.api_keys.of_user("ada")
    assert gw.state.persona_choices.chosen("ada", f"openai:{keys[0].key_id}:work") == "developer"
    # The key's default conversation is another conversation: its persona is still the default one.
    assert gw.state.persona_choices.chosen("ada", f"openai:{keys[0].key_id}") is None


async def test_a_client_that_leaves_mid_stream_still_gets_its_turn_stored(
    start: Start, fake_anthropic: FakeAnthropic
) -> None:
    gw = await start()
    key = person(gw, "ada", "Ada")
    fake_anthropic.chunk_delay_s = 0.05
    fake_anthropic.enqueue("The plumber comes on Tuesday at nine, bring the spare key along please.")
    body = {"model": "kith", "stream": True, "messages": [{"role": "user", "content": "when is the plumber?"}]}
    async with aiohttp.ClientSession() as http, http.post(
        f"http://127.0.0.1:{gw.port}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    ) as resp:
        async for line in resp.content:
            if b'"content":"The' in line:
                break  # the first words arrived: the client goes away
    for _ in range(400):  # the turn finishes without its client (bounded wait, not a timing assertion)
        session = gw.state.sessions.open_in("user:ada")
        rows = gw.state.turns.after(session.session_id) if session is not None else []
        if any(r.role == "assistant" for r in rows):
            break
        await asyncio.sleep(0.025)
    assert [r.role for r in rows] == ["user", "assistant"]
    assert rows[1].content.startswith("The plumber comes on Tuesday at nine")


def _png() -> str:
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


async def test_an_image_in_the_message_reaches_the_model_as_an_image(
    start: Start, fake_anthropic: FakeAnthropic
) -> None:
    gw = await start()
    api = client(gw, person(gw, "ada", "Ada"))
    fake_anthropic.enqueue("A small red square.")
    answer = await api.chat.completions.create(model="kith", messages=[{"role": "user", "content": [  # type: ignore[arg-type]
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": _png()}}]}])
    assert (answer.choices[0].message.content or "").startswith("A small red square.")
    last = fake_anthropic.last_turn()["messages"][-1]["content"]
    assert [b["type"] for b in last if b["type"] == "image"] == ["image"]
    assert any(b["type"] == "text" and "what is this?" in b["text"] for b in last)
    # A URL is never fetched: the client is told to send the file inline.
    with pytest.raises(openai.BadRequestError) as caught:
        await api.chat.completions.create(model="kith", messages=[{"role": "user", "content": [  # type: ignore[arg-type]
            {"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/cat.png"}}]}])
    assert "data: URLs" in str(caught.value)
