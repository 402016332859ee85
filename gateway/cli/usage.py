"""``kith usage [--user U] [--days N] [--json]``: model tokens and cost per person, role and day.

Reads the state database (``state.url``, or ``<data_dir>/state.sqlite``: WAL, safe next to a running
gateway). Cost is in US dollars from the
prices configured per role when each call was made (docs/models.md); ``-`` in the user column is
work done for no person (a group's background job).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.cli.common import load_or_exit
from gateway.cli.users import UsageError, resolve
from gateway.state import config_state_exists, open_config_state
from gateway.state.usage import UsageRow


def register(sub: Any) -> None:
    p = sub.add_parser("usage", help="model tokens and cost per person, role and day")
    p.add_argument("--user", default=None, help="a user id, channel:account or a display name")
    p.add_argument("--days", type=int, default=7, help="this many UTC days back, today included (default 7)")
    p.add_argument("--json", action="store_true", help="rows as JSON")
    p.set_defaults(func=main)


def _since(days: int) -> str:
    return (datetime.now(UTC).date() - timedelta(days=max(days, 1) - 1)).isoformat()


def _table(rows: list[UsageRow], budget: float) -> str:
    if not rows:
        return "no model usage recorded in this period"
    head = f"{'day':<10}  {'user':<16}  {'role':<13}  {'model':<24}  {'calls':>5}  {'in':>9}  {'out':>8}  {'cost $':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.day:<10}  {(r.user_id or '-')[:16]:<16}  {r.role[:13]:<13}  {r.model[:24]:<24}  "
                     f"{r.calls:>5}  {r.input_tokens:>9}  {r.output_tokens:>8}  {r.cost_usd:>9.4f}")
    lines.append("-" * len(head))
    total = sum(r.cost_usd for r in rows)
    lines.append(f"total: {sum(r.calls for r in rows)} calls, {sum(r.input_tokens for r in rows)} in, "
                 f"{sum(r.output_tokens for r in rows)} out, ${total:.4f}"
                 + (f" (daily budget per person: ${budget:.2f})" if budget else ""))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    config = load_or_exit(args)
    if not config_state_exists(config):
        print(f"error: no kith data in {config.data_dir} (no state.sqlite)", file=sys.stderr)
        return 2
    state = open_config_state(config)
    try:
        user = resolve(state, args.user) if args.user else None
        rows = state.usage.rows(since_day=_since(args.days), user_id=user)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        state.close()
    if args.json:
        print(json.dumps([{"day": r.day, "user_id": r.user_id, "role": r.role, "provider": r.provider,
                           "model": r.model, "calls": r.calls, "input_tokens": r.input_tokens,
                           "output_tokens": r.output_tokens, "cache_read_tokens": r.cache_read_tokens,
                           "cache_write_tokens": r.cache_write_tokens, "cost_usd": round(r.cost_usd, 6)}
                          for r in rows], indent=2))
    else:
        print(_table(rows, config.llm.daily_budget_usd))
    return 0
