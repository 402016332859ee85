"""The operator credential: the token that makes a request the operator (``gateway/http/principal.py``
decides what a request may do; the routes declared ``operator=True`` under ``/api`` need it or a
person signed in with the operator role).

Being on loopback proves nothing (a web page on a rebound DNS name, a reverse proxy and every local
process all arrive from 127.0.0.1), so the operator is a credential, never an address:
``Authorization: Bearer <token>``, compared in constant time (or a session cookie issued with the
operator role). The token is ``server.token`` when one is configured; otherwise the daemon creates
``<data_dir>/operator.token`` (32 random bytes, urlsafe, file mode 0600) at its first start and
keeps it across restarts. The CLI reads the same file from the configured data dir,
so only accounts that can read the data dir can act as the operator. Delete the file and restart the
daemon to rotate it. See docs/security.md#operator-token.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import stat
from pathlib import Path

from aiohttp import web

from gateway.config import Config

log = logging.getLogger("kith.httpauth")

TOKEN_FILE = "operator.token"
OPERATOR_TOKEN: web.AppKey[str] = web.AppKey("operator_token", str)


class OperatorTokenError(RuntimeError):
    """The operator token file cannot be created or read; the message says which file and why."""


def token_path(config: Config) -> Path:
    return Path(config.data_dir) / TOKEN_FILE


def ensure_operator_token(config: Config) -> str:
    """The operator credential of a daemon on ``config``: ``server.token``, else the token file,
    created (0600, exclusively, so two starts never race to different tokens) when missing."""
    if config.server.token is not None:
        return config.server.token.get_secret_value()
    path = token_path(config)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        return _read(path)
    except OSError as exc:
        raise OperatorTokenError(f"cannot create the operator token {path}: {exc.strerror}") from None
    token = secrets.token_urlsafe(32)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(token + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise OperatorTokenError(f"cannot write the operator token {path}: {exc.strerror}") from None
    log.info("created the operator token %s (mode 0600; the kith CLI reads it)", path)
    return token


def read_operator_token(config: Config) -> str | None:
    """What the CLI sends: ``server.token``, else the daemon's token file; None when there is no
    file (no daemon has served this data dir)."""
    if config.server.token is not None:
        return config.server.token.get_secret_value()
    path = token_path(config)
    if not path.exists():
        return None
    return _read(path)


def _read(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise OperatorTokenError(f"cannot read the operator token {path}: {exc.strerror}") from None
    with os.fdopen(fd, "r", encoding="ascii", errors="replace") as f:
        mode = os.fstat(f.fileno()).st_mode
        token = f.read().strip()
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        # Another account could read it: tighten it rather than serve with a leaked credential
        # silently (best effort: the CLI of a reading-only account cannot chmod, and need not).
        try:
            os.chmod(path, 0o600)
            log.warning("operator token %s was readable by other accounts; its mode is now 0600", path)
        except OSError:
            log.warning("operator token %s is readable by other accounts; chmod 600 it", path)
    if len(token) < 16:
        raise OperatorTokenError(f"the operator token {path} is empty or too short; delete it and restart kith")
    return token


def tokens_match(given: str, expected: str) -> bool:
    """Constant-time comparison of a client-supplied token, whatever characters it holds (a non-ASCII
    header value is a mismatch, never an error)."""
    try:
        given_bytes = given.encode("utf-8", "surrogateescape")
    except UnicodeError:
        return False
    return hmac.compare_digest(given_bytes, expected.encode("utf-8"))


def bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def is_operator(request: web.Request) -> bool:
    expected = request.app.get(OPERATOR_TOKEN)
    given = bearer(request)
    if expected is None or given is None:
        return False  # fail closed: an app without a credential serves no operator
    return tokens_match(given, expected)
