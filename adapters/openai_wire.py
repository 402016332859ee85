"""The OpenAI chat-completions wire format as kith speaks it on ``/v1`` (docs/openai-api.md).

Parsing a request (``parse_chat``: the new last user message is the turn; kith keeps the history itself)
and building answers: a ``chat.completion``, the ``chat.completion.chunk`` events of a stream, the
``/v1/models`` list, and OpenAI's error object (``{"error": {message, type, param, code}}``), which the
official clients turn into their typed exceptions by status.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.types import Attachment

MAX_TEXT_CHARS = 32_000  # as a WebSocket message (adapters/websocket.py)
_CONVERSATION = re.compile(r"^[A-Za-z0-9._:@-]{1,128}$")
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[^;,]*)*);base64,", re.IGNORECASE)
MAX_PARTS = 10  # files in one message, before the media limits (media.max_files) say their own


class WireError(Exception):
    """A request kith refuses, with OpenAI's error fields."""

    def __init__(self, status: int, message: str, *, type_: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.type, self.param, self.code = status, type_, param, code
        self.headers = headers or {}

    def response(self) -> web.Response:
        body = {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.code}}
        return web.json_response(body, status=self.status, headers={"Cache-Control": "no-store", **self.headers})


def unauthorized(message: str) -> WireError:
    return WireError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": 'Bearer realm="kith /v1"'})


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    text: str  # the last user message: the turn
    attachments: tuple[Attachment, ...]  # its images, files and audio, as data: URLs (docs/openai-api.md)
    stream: bool
    include_usage: bool
    user: str  # OpenAI's ``user`` field: names a conversation when no header does


def _content(content: Any) -> tuple[str, tuple[Attachment, ...]]:
    """A message's text (a string, or the ``text`` parts of a content array) and its files: ``image_url``,
    ``file`` and ``input_audio`` parts, carried inline (kith never fetches a URL a client names)."""
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise WireError(400, "'content' must be a string or an array of content parts", param="messages")
    texts: list[str] = []
    files: list[Attachment] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in ("image_url", "file", "input_audio"):
            files.append(_attachment(kind, part))
    if len(files) > MAX_PARTS:
        raise WireError(400, f"at most {MAX_PARTS} files in one message", param="messages")
    return "\n".join(texts), tuple(files)


def _attachment(kind: str, part: dict[str, Any]) -> Attachment:
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        fmt = str(audio.get("format") or "wav") if isinstance(audio, dict) else "wav"
        data = audio.get("data") if isinstance(audio, dict) else None
        if not isinstance(data, str):
            raise WireError(400, "'input_audio.data' must be base64 audio", param="messages")
        return _inline(f"data:audio/{fmt};base64,{data}", kind="voice", name=f"audio.{fmt}")
    if kind == "file":
        file = part.get("file") or {}
        url = file.get("file_data") if isinstance(file, dict) else None
        name = file.get("filename") if isinstance(file, dict) and isinstance(file.get("filename"), str) else ""
        return _inline(url, kind="document", name=name[:200])
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    return _inline(url, kind="photo", name="")


def _inline(url: Any, *, kind: str, name: str) -> Attachment:
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if match is None:
        raise WireError(400, "files are sent inline, as data: URLs with base64 content; kith does not fetch "
                        "URLs", param="messages")  # fmt: skip
    size = (len(url) - match.end()) * 3 // 4
    return Attachment(kind=kind, name=name, mime_type=(match.group(1) or "").lower(), size=size, url=url)


def inline_bytes(url: str, max_bytes: int) -> bytes | None:
    """The bytes of a data: URL (None when it is not valid base64); ``max_bytes + 1`` at most are decoded."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    payload = url[match.end():]
    if len(payload) * 3 // 4 > max_bytes + 3:
        payload = payload[: (max_bytes // 3 + 2) * 4]  # enough to prove it is over the limit, no more
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None


def parse_chat(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise WireError(400, "the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise WireError(400, "'model' is required: a persona name from GET /v1/models", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise WireError(400, "'messages' must be a non-empty array of message objects", param="messages")
    last = messages[-1]
    if last.get("role") != "user":
        raise WireError(400, "the last message must be the user's: kith answers the newest user message and "
                        "keeps the conversation's history itself", param="messages")  # fmt: skip
    text, attachments = _content(last.get("content"))
    if not text.strip() and not attachments:
        raise WireError(400, "the last user message has no text", param="messages")
    if len(text) > MAX_TEXT_CHARS:
        raise WireError(400, f"the user message is limited to {MAX_TEXT_CHARS} characters", param="messages",
                        code="string_above_max_length")  # fmt: skip
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise WireError(400, "'stream' must be a boolean", param="stream")
    n = body.get("n", 1)
    if n not in (1, None):
        raise WireError(400, "kith gives one answer per message: 'n' must be 1", param="n")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise WireError(400, "'stream_options' must be an object", param="stream_options")
    # OpenAI documents ``user`` as a string; some clients send an object (Open WebUI, for pipelines): ignored.
    user = body.get("user")
    user = user if isinstance(user, str) else ""
    return ChatRequest(model=model, text=text, attachments=attachments, stream=bool(stream),
                       include_usage=options.get("include_usage") is True, user=user)  # fmt: skip


def conversation_name(header: str | None, user_field: str) -> str:
    """The conversation a request names (a header first, then ``user``); ``""`` for the key's default one.

    A header is kith's own (or Open WebUI's chat id): a bad one is refused. ``user`` is free text by
    OpenAI's definition (an email, a name with spaces): one that is not a valid name stands for the
    conversation named by its hash, so the same ``user`` always lands in the same conversation."""
    name = (header or "").strip()
    if name:
        if not _CONVERSATION.match(name):
            raise WireError(400, "a conversation name (X-Kith-Conversation) is 1-128 characters of "
                            "[A-Za-z0-9._:@-]", param=None)  # fmt: skip
        return name
    user = user_field.strip()
    if not user or _CONVERSATION.match(user):
        return user
    return "user-" + hashlib.sha256(user.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def completion(cid: str, model: str, text: str, usage: dict[str, int]) -> dict[str, Any]:
    return {
        "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": usage, "system_fingerprint": None,
    }  # fmt: skip


def chunk(cid: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None, *,
          usage: bool = False) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {
        "id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }  # fmt: skip
    if usage:
        out["usage"] = None  # with include_usage every chunk has the field; only the last one fills it
    return out


def usage_chunk(cid: str, model: str, created: int, usage: dict[str, int]) -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None, "choices": [], "usage": usage}  # fmt: skip


def sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


def usage_of(prompt: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion_tokens, "total_tokens": prompt + completion_tokens}


def model_entry(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "kith"}
