"""Keep credentials out of third-party log lines.

httpx logs every request URL at INFO, and the Telegram Bot API puts the bot token in the URL
(``/bot<token>/getUpdates``); PTB logs that URL at DEBUG. A filter on those loggers rewrites any record
containing the secret before a handler sees it.
"""

from __future__ import annotations

import logging

_REDACTED = "<redacted>"
# Loggers known to print request URLs (and so the Telegram token); children need their own filter.
_URL_LOGGERS = ("httpx", "httpcore", "telegram", "telegram.Bot", "telegram.ext.ExtBot", "telegram.ext.Updater",
                "telegram.ext.Application", "telegram.request", "telegram.ext")


class RedactFilter(logging.Filter):
    def __init__(self, secret: str) -> None:
        super().__init__()
        self.secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the emitter's problem, not ours
            return True
        if self.secret and self.secret in message:
            record.msg = message.replace(self.secret, _REDACTED)
            record.args = None
        return True


def redact_everywhere(secret: str, prefixes: tuple[str, ...] = ("telegram",)) -> None:
    """Install a filter for ``secret`` on the URL-logging loggers and every existing ``prefixes`` logger."""
    if not secret:
        return
    names = set(_URL_LOGGERS)
    names.update(n for n in logging.root.manager.loggerDict if n.startswith(prefixes))
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactFilter) and f.secret == secret for f in logger.filters):
            logger.addFilter(RedactFilter(secret))
