"""Logging setup with secret redaction, as text or as JSON lines (``logging.format``).

kith never logs secrets on purpose; redaction at record creation is the safety net for third-party
libraries that echo URLs or headers (a Telegram bot token is part of every Bot API URL).

JSON lines (docs/operations.md#logs) carry the turn id of the turn that wrote them: ``TURN_ID`` is set
by ``Gateway.handle_inbound`` for the turn's duration, and asyncio copies it into tasks started
meanwhile. The traceback of a JSON line is redacted too (an exception's text may quote a URL).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from datetime import UTC, datetime

from pydantic import BaseModel, SecretStr

from gateway.config import Config


def collect_secrets(node: object) -> list[str]:
    found: list[str] = []
    if isinstance(node, SecretStr):
        found.append(node.get_secret_value())
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            found.extend(collect_secrets(getattr(node, name)))
    elif isinstance(node, (list, tuple)):
        for item in node:
            found.extend(collect_secrets(item))
    elif isinstance(node, dict):
        for item in node.values():
            found.extend(collect_secrets(item))
    return found


_SECRETS: set[str] = set()
_installed = False

#: The turn being handled in this context ("" outside turns); set by ``Gateway.handle_inbound``.
TURN_ID: ContextVar[str] = ContextVar("kith_turn_id", default="")


def redact(text: str) -> str:
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


def install_redaction(secrets: Iterable[str]) -> None:
    """Redact secrets from every log record at creation, whatever handler or test capture reads it.

    Libraries log URLs that carry tokens (a Telegram bot token is part of every Bot API URL), so a
    handler-level filter is not enough: the record itself must never hold the secret.
    """
    global _installed
    _SECRETS.update(s for s in secrets if s and len(s) >= 6)
    if _installed:
        return
    _installed = True
    base = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = base(*args, **kwargs)  # type: ignore[arg-type]
        if _SECRETS:
            try:
                message = record.getMessage()
            except Exception:
                return record
            redacted = redact(message)
            if redacted != message:
                record.msg, record.args = redacted, ()
        return record

    logging.setLogRecordFactory(factory)
    # httpx logs every request URL at INFO; request lines are noise for a daemon anyway.
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class RepeatFilter(logging.Filter):
    """Lets one record through per ``interval_s`` for each distinct message (and exception); the
    next one through says how many were held back.

    Installed on the ``asyncio`` logger: the event loop reports some conditions (an accept loop out
    of file descriptors, for one) from a callback that fires again at once, thousands of times a
    second. kith's own accept loop backs off (``gateway/http/accept.py``); this keeps any other server a
    plugin starts from burying the log the same way.
    """

    def __init__(self, interval_s: float = 30.0, max_keys: int = 1000,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        super().__init__()
        self.interval_s, self.max_keys, self._clock = interval_s, max_keys, clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}  # key -> (last passed at, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        key = (record.getMessage(), f"{type(exc).__name__}: {exc}" if exc is not None else "")
        now = self._clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._seen[key] = (last[0], last[1] + 1)
            return False
        if len(self._seen) >= self.max_keys:
            self._seen.clear()  # distinct messages: nothing repeats, so nothing is lost by forgetting
        self._seen[key] = (now, 0)
        if last is not None and last[1]:
            record.msg = f"{record.msg} (the same message {last[1]} more times in the last {now - last[0]:.1f} s)"
        return True


class TurnIdFilter(logging.Filter):
    """Puts the current turn id on every record (``record.turn_id``; "" outside a turn)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.turn_id = TURN_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``msg``, ``turn`` (when
    inside a turn), ``exc`` (the traceback, redacted) and ``thread`` when not the main thread."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),  # redacted when the record was created (install_redaction)
        }
        turn = getattr(record, "turn_id", "") or TURN_ID.get()
        if turn:
            out["turn"] = turn
        if record.exc_info:
            out["exc"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            out["exc"] = redact(record.exc_text)
        if record.threadName not in (None, "MainThread"):
            out["thread"] = record.threadName
        return json.dumps(out, ensure_ascii=False, default=str)


def make_handler(config: Config) -> logging.Handler:
    handler = logging.StreamHandler()
    if config.logging.format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    handler.addFilter(TurnIdFilter())
    return handler


def setup_logging(config: Config) -> None:
    handler = make_handler(config)
    install_redaction(collect_secrets(config))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.log_level)
    for noisy in ("httpx", "httpcore", "aiohttp.access", "telegram.ext", "discord"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, RepeatFilter) for f in asyncio_log.filters):
        asyncio_log.addFilter(RepeatFilter())
