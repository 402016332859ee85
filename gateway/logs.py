"""Logging setup with secret redaction.

kith never logs secrets on purpose; redaction at record creation is the safety net for third-party
libraries that echo URLs or headers (a Telegram bot token is part of every Bot API URL).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

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
            redacted = message
            for secret in sorted(_SECRETS, key=len, reverse=True):
                if secret in redacted:
                    redacted = redacted.replace(secret, "***")
            if redacted != message:
                record.msg, record.args = redacted, ()
        return record

    logging.setLogRecordFactory(factory)
    # httpx logs every request URL at INFO; request lines are noise for a daemon anyway.
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def setup_logging(config: Config) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    install_redaction(collect_secrets(config))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.log_level)
    for noisy in ("httpx", "httpcore", "aiohttp.access", "telegram.ext", "discord"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
