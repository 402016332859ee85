"""``kith users api-key USER [--label TEXT] | --list | --revoke [KEY_ID]``: keys of the OpenAI-compatible
endpoint (docs/openai-api.md).

Written to the state database directly (a running daemon reads each key when a request presents it, so
a new key works and a revoked one stops at once, without a restart). The key is printed once, on
stdout, and never stored or logged: only its hash is kept.
"""

from __future__ import annotations

import argparse
import json
import sys

from gateway.cli.common import load_or_exit
from gateway.util.safetext import printable


def add_subcommands(users_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Called by ``gateway/cli/users.py`` with the subparsers of ``kith users``."""
    p = users_sub.add_parser("api-key", help="make (shown once), list or revoke a user's keys for /v1 "
                             "(the OpenAI-compatible endpoint)")  # fmt: skip
    p.add_argument("user", metavar="USER", help="a user id, channel:account, or a display name only one person has")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="list the user's keys (ids, labels, last use)")
    what.add_argument("--revoke", nargs="?", const="all", metavar="KEY_ID",
                      help="revoke one key (its id) or, without KEY_ID, every key of the user")
    p.add_argument("--label", default="", help="a note kept with a new key (which client uses it)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=api_key)


def api_key(args: argparse.Namespace) -> int:
    from gateway.cli.users import UsageError, _state, resolve
    from gateway.http.api_keys import mint

    config = load_or_exit(args)
    try:
        state = _state(config)
    except UsageError as exc:
        print(f"kith users api-key: {exc}", file=sys.stderr)
        return 2
    try:
        try:
            uid = resolve(state, args.user)
        except UsageError as exc:
            print(f"kith users api-key: {exc}", file=sys.stderr)
            return 2
        if args.list:
            keys = state.api_keys.of_user(uid)
            rows = [{"key_id": k.key_id, "label": k.label, "created_at": k.created_at.isoformat(),
                     "last_used_at": k.last_used_at.isoformat() if k.last_used_at else None} for k in keys]
            if args.json:
                print(json.dumps({"user": uid, "keys": rows}))
            elif not rows:
                print(f"{uid} has no API keys")
            else:
                for r in rows:
                    print(f"{r['key_id']}  created {r['created_at']}  last used {r['last_used_at'] or 'never'}"
                          f"  {printable(r['label'])}")
            return 0
        if args.revoke is not None:
            one = None if args.revoke == "all" else args.revoke
            n = state.api_keys.revoke(uid, one)
            if args.json:
                print(json.dumps({"user": uid, "revoked": n}))
            elif one is not None and n == 0:
                print(f"kith users api-key: {uid} has no key {printable(one)!r} (see --list)", file=sys.stderr)
                return 2
            else:
                print(f"revoked {n} API key{'s' if n != 1 else ''} of {uid}")
            return 0
        new = mint(state, uid, label=args.label)
    finally:
        state.close()
    if args.json:
        print(json.dumps({"user": uid, "key_id": new.record.key_id, "key": new.key, "label": new.record.label}))
    else:
        print(f"API key {new.record.key_id} for {uid} (shown once; kith keeps only its hash):", file=sys.stderr)
        print(new.key)
        print("use it as the bearer token of the OpenAI-compatible endpoint: base URL <kith>/v1 "
              "(docs/openai-api.md)", file=sys.stderr)
    return 0
