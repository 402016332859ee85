"""The chat's microphone (issue 31's and 33's acceptance): Chromium records from its fake microphone,
the recording goes through the upload and transcription pipeline, and the turn shows the transcript
(headless Chromium with a fake audio device, at 1280 and 390 px)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.browser import ARGS, shared_browser
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai_server import API_KEY as OPENAI_KEY
from tests.fakes.openai_server import FakeOpenAI
from tests.web.chat_support import T, open_chat, wait_until

pytestmark = pytest.mark.browser
SIZES = ["desktop", "phone"]
SAID = "remind me to water the tomatoes"


@pytest.fixture
async def mic_browser() -> AsyncIterator[Any]:
    """Chromium whose microphone is a generated tone and whose permission prompt says yes."""
    async for b in shared_browser((*ARGS, "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream")):
        yield b


async def test_a_recorded_voice_message_is_transcribed_and_shown_as_the_turn(
    mic_browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    async with FakeOpenAI(transcript_text=SAID) as speech:
        role = {"provider": "openai", "base_url": speech.url, "api_key": OPENAI_KEY, "max_retries": 0,
                "model": "whisper-1"}  # fmt: skip
        gw = await make_gateway(llm={**anthropic_llm, "roles": {"transcription": role}},
                                server={"local_owner": False})  # fmt: skip
        for size in SIZES:
            fake_anthropic.enqueue("I will remind you about the tomatoes.")
            chat = await open_chat(mic_browser, gw, size, client_id=f"web-voice-{size}")
            page = chat.page
            assert await page.is_visible("#mic")
            await page.click("#mic")
            await page.wait_for_selector("#mic.recording")
            await wait_until(page, "document.getElementById('mic-time').textContent === '0:01'")
            await chat.shot("recording")
            await page.click("#mic")  # stop: it is sent
            # Upload, transcription and the model's answer in a row: on a loaded 2-core machine this once took
            # more than T (under -n 2 beside the layout tests).
            await page.wait_for_selector("#log .msg.bot >> text=I will remind you about the tomatoes.", timeout=3 * T)
            # The turn is what was understood, with the voice note beside it.
            await wait_until(page, f"document.querySelector('#log .msg.me')?.textContent.includes({SAID!r})")
            mine = page.locator("#log .msg.me")
            assert await mine.count() == 1
            assert await mine.locator(".file-chip").count() == 1
            await chat.shot("voice-sent")
            upload = speech.transcriptions[-1]
            assert upload["model"] == "whisper-1" and upload["mime"].startswith("audio/") and len(upload["data"]) > 100
            asked = fake_anthropic.requests[-1]["messages"][-1]["content"]
            assert SAID in str(asked)
            assert not chat.errors, chat.errors
