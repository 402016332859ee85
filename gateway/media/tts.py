"""Voice replies: a reply spoken by the ``speech`` model role and sent as a voice note (issue 31).

The role (``llm.roles.speech``, ``provider: openai``) is any OpenAI-compatible ``/v1/audio/speech``:
OpenAI, openedai-speech, Kokoro-FastAPI. It is asked through the ``openai`` SDK, on the client of the
provider the gateway already holds for the role (its key, URL, headers, retries; closed with the
gateway), for ``response_format="opus"``: Ogg/Opus, which is what Telegram's ``sendVoice`` plays as a
voice note and what Discord plays inline. Nothing is transcoded, so no codec library (PyAV, ffmpeg) is
needed; what comes back is checked to be Ogg/Opus and its duration read (``tts_ogg``), and anything
else is refused.

Which replies are spoken is each channel's ``voice_replies`` (``VoiceOptions``): ``off``,
``when_spoken`` (the person's message carried a voice note; the default) or ``always``. A notice, a
stopped reply, and a reply longer than ``speech.max_chars`` once its Markdown is taken out, are never
spoken. The spoken characters are counted in `kith usage` (role ``speech``, priced per million
characters by its ``prices.input_per_mtok``).

A voice reply never costs the text: adapters send the text first, as always, then the voice note; a
slow, failing or absent speech server is logged and the text stands alone. The audio is never stored
(an Off-The-Record turn's least of all): it goes from the server to the platform.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gateway.configtypes import Section
from gateway.media.tts_ogg import NotOggOpus, read_ogg_opus
from gateway.types import InboundMessage, Reply

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from gateway.config import SpeechConfig
    from gateway.services import Services

log = logging.getLogger("kith.media.tts")

ROLE = "speech"
VoiceReplies = Literal["off", "when_spoken", "always"]
VOICE_NAME = "reply.ogg"
VOICE_MIME = "audio/ogg"


class VoiceOptions(Section):
    """The key a channel that can send voice notes adds to its config section (``adapters/*_config.py``)."""

    # off: never; when_spoken: when the person's message was a voice note; always: every model reply.
    voice_replies: VoiceReplies = "when_spoken"


class SpeechFailed(Exception):
    """The speech server gave no usable audio (unreachable, an error, too slow, too big, not Ogg/Opus)."""


@dataclass(frozen=True, slots=True)
class Speech:
    """A spoken reply: Ogg/Opus bytes and their length in seconds (Telegram shows it on the note)."""

    data: bytes
    duration_s: float
    name: str = VOICE_NAME
    mime_type: str = VOICE_MIME

    @property
    def seconds(self) -> int:
        """Whole seconds, at least 1: what ``sendVoice``'s ``duration`` takes."""
        return max(1, round(self.duration_s))


def spoke(message: InboundMessage) -> bool:
    """The person's message carried a voice note (a recorded message, not a music file)."""
    return any(a.kind == "voice" for a in message.attachments)


def wanted(mode: VoiceReplies, message: InboundMessage, reply: Reply) -> bool:
    if mode == "off" or reply.notice or reply.stopped or not reply.text.strip():
        return False
    return mode == "always" or spoke(message)


def speech_configured(gateway: Services) -> bool:
    """A ``speech`` role is configured, on a provider that has ``/v1/audio/speech``."""
    roles = gateway.config.llm.roles
    return ROLE in roles and gateway.config.llm.role(ROLE).provider == "openai"


_FENCED = re.compile(r"```.*?(```|$)", re.DOTALL)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_MARKS = re.compile(r"(^|\n)[ \t]{0,3}(#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+)|[*_`~]+")


def speakable(text: str) -> str:
    """What is read aloud of a Markdown reply: no code blocks, no URLs, no markup characters."""
    text = _FENCED.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _MARKS.sub(r"\1", text)
    lines = (re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


async def synthesize(gateway: Services, text: str) -> Speech:
    """``text`` spoken by the ``speech`` role, held to ``speech.max_bytes`` and ``speech.timeout_s``.
    ``SpeechFailed`` when no usable Ogg/Opus came back."""
    import openai  # here, not at the top: channel configs import this module, and reading one stays light

    cfg: SpeechConfig = gateway.config.speech
    client = getattr(gateway.llm(ROLE), "client", None)  # the role's OpenAIProvider, which the gateway closes
    if not isinstance(client, openai.AsyncOpenAI):
        raise SpeechFailed("the speech role has no usable provider (provider openai needs api_key or base_url)")
    model = gateway.config.llm.role(ROLE).model
    try:
        data = await asyncio.wait_for(_fetch(client, model, text, cfg), cfg.timeout_s)
    except TimeoutError:
        raise SpeechFailed(f"no audio within {cfg.timeout_s:g} s") from None
    try:
        ogg = read_ogg_opus(data)
    except NotOggOpus as exc:
        raise SpeechFailed(f"the speech server did not answer Ogg/Opus: {exc}") from None
    if ogg.duration_s <= 0:
        raise SpeechFailed("the speech server answered silence (no samples)")
    return Speech(data=data, duration_s=ogg.duration_s)


async def _fetch(client: AsyncOpenAI, model: str, text: str, cfg: SpeechConfig) -> bytes:
    import openai

    chunks: list[bytes] = []
    size = 0
    try:
        async with client.audio.speech.with_streaming_response.create(
                model=model, voice=cfg.voice, input=text, response_format="opus", speed=cfg.speed) as response:
            async for chunk in response.iter_bytes():
                size += len(chunk)
                if size > cfg.max_bytes:  # stop reading: a runaway answer is never buffered whole
                    raise SpeechFailed(f"the audio is over speech.max_bytes ({cfg.max_bytes:,} bytes)")
                chunks.append(chunk)
    except openai.APIStatusError as exc:
        raise SpeechFailed(f"the speech server answered {exc.status_code}") from None
    except openai.APIError as exc:
        raise SpeechFailed(f"the speech server could not be reached ({type(exc).__name__})") from None
    return b"".join(chunks)


async def voice_reply(gateway: Services, mode: VoiceReplies, message: InboundMessage, reply: Reply) -> Speech | None:
    """The reply spoken, when ``mode`` wants it and a ``speech`` role is configured; ``None`` otherwise,
    or when speaking failed (logged: the text reply, sent first, stands alone). Never raises."""
    if not wanted(mode, message, reply):
        return None
    if not speech_configured(gateway):
        log.debug("voice reply skipped: no speech role (llm.roles.speech, provider openai)")
        return None
    text = speakable(reply.text)
    limit = gateway.config.speech.max_chars
    if not text or len(text) > limit:
        log.info("voice reply skipped: %d characters to speak, speech.max_chars is %d", len(text), limit)
        return None
    try:
        speech = await synthesize(gateway, text)
        if not reply.otr:
            _count(gateway, message, len(text))
        return speech
    except asyncio.CancelledError:
        raise
    except SpeechFailed as exc:
        log.warning("voice reply on %s not sent: %s", message.channel, exc)
    except Exception as exc:  # a voice note is a bonus: nothing in it may cost the person their answer
        log.warning("voice reply on %s failed: %s", message.channel, type(exc).__name__, exc_info=True)
    return None


def _count(gateway: Services, message: InboundMessage, chars: int) -> None:
    """The spoken characters into `kith usage` (role ``speech``): speech is billed per character, so its
    ``prices.input_per_mtok`` is per million characters and the characters are its input. Off-The-Record
    turns leave nothing behind, as for every model call (gateway/llm/usage.py)."""
    from gateway.llm.usage import today

    try:
        role = gateway.config.llm.role(ROLE)
        user_id = gateway.state.identities.lookup(message.channel, message.account_id) or ""
        gateway.state.usage.add(user_id=user_id, day=today(), role=ROLE, provider=role.provider, model=role.model,
                                input_tokens=chars, output_tokens=0, cache_read_tokens=0, cache_write_tokens=0,
                                cost_usd=chars * role.prices.input_per_mtok / 1e6)
    except Exception:  # bookkeeping never costs a person their answer
        log.exception("recording speech usage failed")
