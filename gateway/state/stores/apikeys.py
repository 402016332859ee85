"""Per-person API keys of the OpenAI-compatible endpoint (docs/openai-api.md).

Only a SHA-256 hash of each key is stored (the key is shown once, by ``kith users api-key``), so a
copy of the database authenticates nobody. The ``user_id`` column makes ``kith users delete`` erase a
person's keys with the rest of their rows (gateway/state/stores/people.py).
"""

from __future__ import annotations

from datetime import datetime

from gateway.state.database import Database
from gateway.state.records import ApiKey
from gateway.state.timestamps import parse_ts, ts

_COLUMNS = "key_id, user_id, label, created_at, last_used_at"


def _key(row: tuple[object, ...]) -> ApiKey:
    return ApiKey(key_id=str(row[0]), user_id=str(row[1]), label=str(row[2]), created_at=parse_ts(str(row[3])),
                  last_used_at=parse_ts(str(row[4])) if row[4] else None)  # fmt: skip


class ApiKeys:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add(self, key_hash: str, *, key_id: str, user_id: str, label: str, at: datetime) -> None:
        self._db.run(
            "INSERT INTO api_keys(key_hash, key_id, user_id, label, created_at) VALUES (?,?,?,?,?)",
            (key_hash, key_id, user_id, label, ts(at)),
        )

    def by_hash(self, key_hash: str) -> ApiKey | None:
        row = self._db.one(f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash=?", (key_hash,))
        return _key(row) if row is not None else None

    def of_user(self, user_id: str) -> list[ApiKey]:
        rows = self._db.all(f"SELECT {_COLUMNS} FROM api_keys WHERE user_id=? ORDER BY created_at, key_id",
                            (user_id,))  # fmt: skip
        return [_key(r) for r in rows]

    def revoke(self, user_id: str, key_id: str | None = None) -> int:
        """Delete one key of ``user_id`` (``key_id``) or all of them; how many were deleted."""
        if key_id is None:
            return self._db.run("DELETE FROM api_keys WHERE user_id=?", (user_id,)).rowcount
        return self._db.run("DELETE FROM api_keys WHERE user_id=? AND key_id=?", (user_id, key_id)).rowcount

    def touch(self, key_id: str, at: datetime) -> None:
        self._db.run("UPDATE api_keys SET last_used_at=? WHERE key_id=?", (ts(at), key_id))
