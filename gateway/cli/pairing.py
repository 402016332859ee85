"""``kith pairing list | approve CODE | deny CODE | revoke CHANNEL ACCOUNT``: the owner's side of pairing.

Works against ``<data_dir>/state.sqlite`` directly, so it needs no running gateway; the gateway reads
approvals on the next message from that sender.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from gateway.access import AccessStore
from gateway.config import ConfigError, load_config


def _store(args: argparse.Namespace) -> AccessStore:
    from pathlib import Path

    path = args.config
    if path is None and Path("config.yaml").is_file():
        path = "config.yaml"
    return AccessStore.for_config(load_config(path))


def _list(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        pending = store.pending(args.channel)
        if not pending:
            print("no pending pairing requests")
        for req in pending:
            name = f" ({req.display_name})" if req.display_name else ""
            print(
                f"{req.code}  {req.channel}:{req.account_id}{name}  requests={req.requests}"
                f"  expires={req.expires_at}"
            )
        if args.approved:
            for row in store.approved():
                acct = f"{row['channel']}:{row['account_id']}"
                print(f"approved  {acct}  via={row['via']}  at={row['approved_at']}")
    finally:
        store.close()
    return 0


def _decide(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        req = store.approve(args.code) if args.action == "approve" else store.deny(args.code)
    finally:
        store.close()
    if req is None:
        print(f"no pending request with code {args.code!r} (unknown or expired)", file=sys.stderr)
        return 1
    verb = "approved" if args.action == "approve" else "denied"
    print(f"{verb} {req.channel}:{req.account_id}" + (f" ({req.display_name})" if req.display_name else ""))
    return 0


def _revoke(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        ok = store.revoke(args.channel, args.account)
    finally:
        store.close()
    print(f"revoked {args.channel}:{args.account}" if ok else "no such approved account")
    return 0 if ok else 1


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(func(args))
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2

    return run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("pairing", help="approve or deny people who asked to talk to the bot")
    psub = parser.add_subparsers(dest="pairing_action", metavar="ACTION", required=True)
    p = psub.add_parser("list", help="pending pairing requests")
    p.add_argument("--channel", default=None)
    p.add_argument("--approved", action="store_true", help="also list approved accounts")
    p.set_defaults(func=_guard(_list))
    for action in ("approve", "deny"):
        p = psub.add_parser(action, help=f"{action} a pending pairing code")
        p.add_argument("code")
        p.set_defaults(func=_guard(_decide), action=action)
    p = psub.add_parser("revoke", help="remove an approved account")
    p.add_argument("channel")
    p.add_argument("account")
    p.set_defaults(func=_guard(_revoke))
