"""Persona choices: which persona a person picked, per conversation and as their default."""

from __future__ import annotations

from datetime import datetime

from gateway.state.database import Database
from gateway.state.timestamps import ts


class PersonaChoices:
    """Rows ``(user_id, conversation_key, persona)``; ``conversation_key = ''`` is the person's default."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def chosen(self, user_id: str, conversation_key: str) -> str | None:
        row = self._db.one("SELECT persona FROM persona_choices WHERE user_id=? AND conversation_key=?",
                           (user_id, conversation_key))  # fmt: skip
        return str(row[0]) if row else None

    def choices(self, user_id: str) -> dict[str, str]:
        rows = self._db.all("SELECT conversation_key, persona FROM persona_choices WHERE user_id=?"
                            " ORDER BY conversation_key", (user_id,))  # fmt: skip
        return {str(k): str(p) for k, p in rows}

    def choose(self, user_id: str, conversation_key: str, persona: str, at: datetime) -> None:
        self._db.run(
            "INSERT INTO persona_choices(user_id, conversation_key, persona, updated_at) VALUES (?,?,?,?)"
            " ON CONFLICT(user_id, conversation_key) DO UPDATE SET persona=excluded.persona,"
            " updated_at=excluded.updated_at",
            (user_id, conversation_key, persona, ts(at)),
        )

    def clear(self, user_id: str, conversation_key: str) -> bool:
        cur = self._db.run("DELETE FROM persona_choices WHERE user_id=? AND conversation_key=?",
                           (user_id, conversation_key))  # fmt: skip
        return cur.rowcount > 0

    def forget_user(self, user_id: str) -> int:
        return self._db.run("DELETE FROM persona_choices WHERE user_id=?", (user_id,)).rowcount

    def merge(self, *, into: str, source: str) -> None:
        """A link merge: the surviving person's choices win; the merged one's fill the gaps."""
        with self._db.tx():
            self._db.run("INSERT INTO persona_choices(user_id, conversation_key, persona, updated_at)"
                         " SELECT ?, conversation_key, persona, updated_at FROM persona_choices WHERE user_id=?"
                         " ON CONFLICT DO NOTHING",
                         (into, source))  # fmt: skip
            self._db.run("DELETE FROM persona_choices WHERE user_id=?", (source,))
