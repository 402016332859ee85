"""Per-person API keys of the OpenAI-compatible endpoint (``/v1``, docs/openai-api.md).

A key is ``sk-kith-<key id>-<secret>``: the key id is public (listings, ``--revoke``), the secret is 256
random bits. Only the SHA-256 hash of the whole key is stored (``State.api_keys``), so the key is
shown once, when ``kith users api-key USER`` makes it, and a copy of the database authenticates
nobody. A key speaks for one person: requests with it are that person's turns on the ``openai``
channel, whose account (``openai:<user id>``) is created with the first key. A key is distinct from
the operator token and from a browser's sign-in cookie: neither opens ``/v1``, and a key opens nothing
else. Keys are erased with their person (``kith users delete``) and follow a merge (``/link``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.state import ApiKey, State, StorageError

CHANNEL = "openai"
PREFIX = "sk-kith-"
_KEY = re.compile(r"^sk-kith-([0-9a-f]{12})-[A-Za-z0-9_-]{43}$")
MAX_LABEL = 100


@dataclass(frozen=True, slots=True)
class NewKey:
    key: str  # shown once, never stored
    record: ApiKey


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def ensure_account(state: State, user_id: str, *, display_name: str = "") -> None:
    """The person's ``openai`` account, so a turn with their key resolves to them (never to a new user)."""
    if state.identities.lookup(CHANNEL, user_id) is None:
        state.identities.add(CHANNEL, user_id, user_id, display_name=display_name, source="api-key",
                             at=datetime.now(UTC))  # fmt: skip


def mint(state: State, user_id: str, *, label: str = "") -> NewKey:
    """A new key for ``user_id`` (who must exist); the key itself is in the result only."""
    user = state.users.get(user_id)
    if user is None:
        raise LookupError(f"no user {user_id!r}")
    label = label.strip()[:MAX_LABEL]
    error: StorageError | None = None
    for _ in range(5):  # a key id collision (48 random bits) is retried, not reported
        key_id = secrets.token_hex(6)
        key = f"{PREFIX}{key_id}-{secrets.token_urlsafe(32)}"
        now = datetime.now(UTC)
        try:
            with state.tx():
                state.api_keys.add(key_hash(key), key_id=key_id, user_id=user_id, label=label, at=now)
                ensure_account(state, user_id, display_name=user.display_name)
        except StorageError as exc:
            # A key id taken already (48 random bits: next to never) is retried; anything else repeats.
            error = exc
            continue
        return NewKey(key=key, record=ApiKey(key_id=key_id, user_id=user_id, label=label, created_at=now,
                                             last_used_at=None))  # fmt: skip
    assert error is not None
    raise error


def authenticate(state: State, given: str) -> ApiKey | None:
    """The key record ``given`` is, when it is a current key of an existing person; else None.

    Looked up by hash: the hash of an attacker's guess says nothing about a stored key, so a lookup that
    misses early leaks nothing worth timing."""
    if not _KEY.match(given):
        return None
    found = state.api_keys.by_hash(key_hash(given))
    if found is None or state.users.get(found.user_id) is None:
        return None
    return found
