"""``kith schedule list | show | cancel``: what people have scheduled (reminders, scheduled prompts,
task alerts), read from their files; no running daemon needed.

``list`` without ``--user`` lists everyone who has something scheduled; ``cancel`` marks the item in
its file (a running daemon's armed job then finds it cancelled and delivers nothing). USER is a user
id, ``channel:account`` or a display name only one person has (as in ``kith users``). docs/proactive.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.cli.common import load_or_exit
from gateway.config import Config
from gateway.memory.files.store import MemoryStore
from gateway.memory.files.stores import Stores
from gateway.schedule.items import FILES
from gateway.schedule.listing import ItemView, cancel, schedule_of_user
from gateway.schedule.zones import zone
from gateway.util.safetext import printable


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("schedule", help="reminders, scheduled prompts and task alerts: list, show, cancel")
    ssub = parser.add_subparsers(dest="schedule_action", metavar="ACTION")
    p = ssub.add_parser("list", help="a person's scheduled items (next due first), or everyone with some")
    p.add_argument("--user", default=None, metavar="USER")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_list)
    p = ssub.add_parser("show", help="one item in detail")
    p.add_argument("id", metavar="ID")
    p.add_argument("--user", required=True, metavar="USER")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_show)
    p = ssub.add_parser("cancel", help="cancel one item (marked in its file)")
    p.add_argument("id", metavar="ID")
    p.add_argument("--user", required=True, metavar="USER")
    p.set_defaults(func=_cancel)
    parser.set_defaults(func=lambda a: (parser.print_help(), 2)[1])


def _person(config: Config, user: str) -> tuple[str, str]:
    """(user id, time zone) of USER; UsageError when nobody is."""
    from gateway.cli.users import resolve
    from gateway.state import config_state_exists, open_config_state

    if not config_state_exists(config):
        raise LookupError(f"no state at {Path(config.data_dir) / 'state.sqlite'}: has kith run with this config?")
    state = open_config_state(config)
    try:
        uid = resolve(state, user)
        record = state.users.get(uid)
        return uid, zone(record.timezone if record else "", config.timezone).key
    finally:
        state.close()


def _store(config: Config, uid: str) -> MemoryStore:
    return Stores.of(config).for_user(uid)


def _run(args: argparse.Namespace, body: Any) -> int:
    from gateway.cli.users import UsageError

    config = load_or_exit(args)
    try:
        return int(body(config))
    except (UsageError, LookupError) as exc:
        print(f"kith schedule: {exc}", file=sys.stderr)
        return 2


def _line(v: ItemView) -> str:
    due = v.next_due or "-"
    return f"{v.id:<12} {v.kind:<8} {v.status:<9} {due:<21} {printable(v.when)[:32]:<32} {printable(v.text)[:60]}"


def _list(args: argparse.Namespace) -> int:
    def body(config: Config) -> int:
        from gateway.state import config_state_exists

        now = datetime.now(UTC)
        if args.user:
            uid, tz = _person(config, args.user)
            items, problems = schedule_of_user(_store(config, uid), tz, now)
            if args.json:
                print(json.dumps({"user_id": uid, "timezone": tz, "items": [i.as_dict() for i in items],
                                  "problems": [{"file": p.file, "line": p.line, "message": p.message,
                                                "text": p.text} for p in problems]}, indent=2))
                return 0
            print(f"{uid} ({tz}): {len(items)} item(s)")
            for v in items:
                print(_line(v))
            for p in problems:
                print(f"problem: {printable(p.describe())}")
            return 0
        users_dir = Path(config.data_dir) / "users"
        names = sorted(d.name for d in users_dir.iterdir() if d.is_dir() and any((d / f).exists() for f in FILES)) \
            if users_dir.exists() else []
        rows = []
        for uid in names:
            _, tz = _person(config, uid) if config_state_exists(config) else (uid, "UTC")
            items, problems = schedule_of_user(_store(config, uid), tz, now)
            active = [i for i in items if i.next_due]
            rows.append({"user_id": uid, "timezone": tz, "active": len(active),
                         "next_due": min((i.next_due for i in active), default=""), "problems": len(problems)})
        if args.json:
            print(json.dumps({"users": rows}, indent=2))
            return 0
        for r in rows:
            print(f"{r['user_id']:<16} {r['timezone']:<24} {r['active']:>4} active  next {r['next_due'] or '-':<21}"
                  f" {r['problems']} problem(s)")
        if not rows:
            print("nobody has anything scheduled")
        return 0

    return _run(args, body)


def _show(args: argparse.Namespace) -> int:
    def body(config: Config) -> int:
        uid, tz = _person(config, args.user)
        items, _ = schedule_of_user(_store(config, uid), tz, datetime.now(UTC))
        found = next((i for i in items if i.id == args.id), None)
        if found is None:
            raise LookupError(f"{uid} has no item {args.id!r}")
        if args.json:
            print(json.dumps(found.as_dict(), indent=2))
        else:
            for key, value in found.as_dict().items():
                print(f"{key:<9} {printable(str(value))}")
        return 0

    return _run(args, body)


def _cancel(args: argparse.Namespace) -> int:
    def body(config: Config) -> int:
        uid, tz = _person(config, args.user)
        done = cancel(_store(config, uid), args.id, tz, datetime.now(UTC), source="cli:schedule")
        if done is None:
            raise LookupError(f"{uid} has no active item {args.id!r}")
        print(f"cancelled {done.kind} {done.id}: {printable(done.text)}")
        return 0

    return _run(args, body)
