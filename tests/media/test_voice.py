"""A voice note is transcribed through the ``transcription`` role (an OpenAI-compatible
``/v1/audio/transcriptions``, the fake server) and the transcript is the turn; the audio is kept."""

from __future__ import annotations

from typing import Any

from gateway.testing import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai_server import API_KEY, FakeOpenAI
from tests.media.rig import media_files, signed_in_browser

OGG = b"OggS\x00\x02" + bytes(200)  # an Ogg page header: what a recorded voice note starts with


async def test_a_voice_note_is_transcribed_and_the_transcript_is_the_turn(
    make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    async with FakeOpenAI() as whisper:
        whisper.transcript_text = "remind me to water the tomatoes on Friday"
        llm = {**anthropic_llm, "roles": {"transcription": {"provider": "openai", "model": "whisper-1",
                                                            "base_url": whisper.url, "api_key": API_KEY}}}
        gw = await make_gateway(llm=llm)
        b = await signed_in_browser(gw)
        try:
            status, up = await b.upload(OGG, "voice.ogg", "audio/ogg")
            assert status == 201, up
            fake_anthropic.enqueue("I will remind you on Friday.")
            reply = await b.send("", [up["upload_id"]])
            assert reply["text"] == "I will remind you on Friday.", reply
            [sent] = whisper.transcriptions
            assert sent["model"] == "whisper-1" and sent["data"] == OGG
            content = fake_anthropic.last_turn()["messages"][-1]["content"]
            text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
            assert text.startswith("remind me to water the tomatoes on Friday"), text
            stored = media_files(gw.data_dir, b.user_id)
            assert len(stored) == 1 and stored[0].endswith("-voice.ogg"), stored
            assert (gw.data_dir / "users" / b.user_id / stored[0]).read_bytes() == OGG, "the audio is kept"
            assert f"[voice.ogg]({stored[0]})" in text
        finally:
            await b.close()


async def test_a_voice_note_without_a_transcription_model_gets_a_clear_reply(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()  # echo: no provider that can transcribe
    b = await signed_in_browser(gw)
    try:
        status, up = await b.upload(OGG, "voice.ogg", "audio/ogg")
        assert status == 201
        reply = await b.send("", [up["upload_id"]])
        assert reply["notice"] and "voice notes need a transcription model" in reply["text"], reply
        assert media_files(gw.data_dir, b.user_id) == []
    finally:
        await b.close()
