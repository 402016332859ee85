"""Model token use and cost (gateway/state/usage.py): one upserted row per person, day, role
and model, so the table grows with days, not with calls. ``user_id`` makes ``kith users delete``
erase a person's rows with the rest."""

from __future__ import annotations

from gateway.state.database import Database
from gateway.state.usage import UsageRow

_COLUMNS = ("user_id, day, role, provider, model, calls, input_tokens, output_tokens, cache_read_tokens,"
            " cache_write_tokens, cost_usd")


class Usage:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add(self, *, user_id: str, day: str, role: str, provider: str, model: str, input_tokens: int,
            output_tokens: int, cache_read_tokens: int, cache_write_tokens: int, cost_usd: float) -> None:
        self._db.run(
            f"INSERT INTO llm_usage({_COLUMNS}) VALUES (?,?,?,?,?,1,?,?,?,?,?)"
            " ON CONFLICT(user_id, day, role, provider, model) DO UPDATE SET calls=llm_usage.calls+1,"
            " input_tokens=llm_usage.input_tokens+excluded.input_tokens,"
            " output_tokens=llm_usage.output_tokens+excluded.output_tokens,"
            " cache_read_tokens=llm_usage.cache_read_tokens+excluded.cache_read_tokens,"
            " cache_write_tokens=llm_usage.cache_write_tokens+excluded.cache_write_tokens,"
            " cost_usd=llm_usage.cost_usd+excluded.cost_usd",
            (user_id, day, role, provider, model, input_tokens, output_tokens, cache_read_tokens,
             cache_write_tokens, cost_usd),
        )

    def rows(self, *, since_day: str, user_id: str | None = None) -> list[UsageRow]:
        where, args = "day >= ?", [since_day]
        if user_id is not None:
            where += " AND user_id = ?"
            args.append(user_id)
        found = self._db.all(f"SELECT {_COLUMNS} FROM llm_usage WHERE {where}"
                             " ORDER BY day DESC, user_id, role, model", tuple(args))
        return [UsageRow(user_id=str(r[0]), day=str(r[1]), role=str(r[2]), provider=str(r[3]), model=str(r[4]),
                         calls=int(r[5]), input_tokens=int(r[6]), output_tokens=int(r[7]),
                         cache_read_tokens=int(r[8]), cache_write_tokens=int(r[9]),
                         cost_usd=float(r[10])) for r in found]

    def cost_on(self, user_id: str, day: str) -> float:
        row = self._db.one("SELECT COALESCE(SUM(cost_usd), 0) FROM llm_usage WHERE user_id=? AND day=?",
                           (user_id, day))
        return float(row[0]) if row is not None else 0.0
