"""``kith pairing list | approve CODE | deny CODE | invite | revoke CHANNEL ACCOUNT``: the owner's side of pairing.

Works against the state database directly (``state.url``, or ``<data_dir>/state.sqlite``), so it
needs no running gateway; the gateway reads
approvals on the next message from that sender.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from gateway.config import ConfigError
from gateway.configread import load_config
from gateway.turn.admission import INVITE_TTL_S, AccessStore, format_invite, normalize_code
from gateway.util.safetext import printable


def _who(channel: str, account_id: str, display_name: str = "") -> str:
    """``channel:account (name)`` for the terminal. The account id and the name come from strangers:
    control characters are shown as escapes, so a name cannot retitle, clear or rewrite the screen."""
    name = f" ({printable(display_name)})" if display_name else ""
    return f"{printable(channel)}:{printable(account_id)}{name}"


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
            print(
                f"{req.code}  {_who(req.channel, req.account_id, req.display_name)}  requests={req.requests}"
                f"  expires={req.expires_at}"
            )
        for st in store.stats():
            if args.channel and st.channel != args.channel:
                continue
            # A flood shows here: strangers refused or pushed out lately. Invites are the answer to it.
            print(
                f"queue {printable(st.channel)}: {st.pending} waiting; since {st.since}: {st.refused} turned away"
                f" (queue full), {st.over_quota} over the per-account code quota, {st.evicted} pushed out"
                " after their protected time; invite people you know: kith pairing invite"
            )
        for inv in store.invites():
            note = f"  ({printable(inv.note)})" if inv.note else ""
            print(f"invite {format_invite(inv.code)}  {inv.channel or 'any channel'}  expires={inv.expires_at}{note}")
        if args.approved:
            for row in store.approved():
                acct = _who(row.channel, row.account_id, row.display_name)
                print(f"approved  {acct}  via={row.via}  at={row.approved_at}")
    finally:
        store.close()
    return 0


def _decide(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        req = store.approve(args.code) if args.action == "approve" else store.deny(args.code)
        if req is None and args.action == "deny" and store.revoke_invite(args.code):
            print(f"revoked invite {format_invite(normalize_code(args.code))}")
            return 0
    finally:
        store.close()
    if req is None:
        print(f"no pending request with code {args.code!r} (unknown or expired)", file=sys.stderr)
        return 1
    verb = "approved" if args.action == "approve" else "denied"
    print(f"{verb} {_who(req.channel, req.account_id, req.display_name)}")
    return 0


def _invite(args: argparse.Namespace) -> int:
    if not 0 < args.days <= 365:
        print("--days must be more than 0 and at most 365", file=sys.stderr)
        return 2
    store = _store(args)
    try:
        inv = store.create_invite(channel=args.channel or "", ttl_s=args.days * 86400, note=args.note)
    finally:
        store.close()
    plain = inv.code
    where = inv.channel or "any channel"
    print(f"invite {format_invite(plain)}  ({where}, single use, expires {inv.expires_at})")
    print(f"Give it to the person; their first message to the bot is:  /start {plain}")
    print(f"(on Telegram the link https://t.me/<your bot's username>?start={plain} sends that)")
    print("They are approved at once, however full the pairing queue is.")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        ok = store.revoke(args.channel, args.account)
    finally:
        store.close()
    print(f"revoked {_who(args.channel, args.account)}" if ok else "no such approved account")
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
    p = psub.add_parser("invite", help="a single-use invite: the person it is for skips the pairing queue")
    p.add_argument("--channel", default=None, help="only valid on this channel (default: any)")
    p.add_argument("--days", type=float, default=INVITE_TTL_S / 86400, help="lifetime in days (default 7)")
    p.add_argument("--note", default="", help="who it is for (shown by `kith pairing list`)")
    p.set_defaults(func=_guard(_invite))
    for action in ("approve", "deny"):
        p = psub.add_parser(action, help=f"{action} a pending pairing code" + (" (or revoke an invite)"
                                                                                if action == "deny" else ""))
        p.add_argument("code")
        p.set_defaults(func=_guard(_decide), action=action)
    p = psub.add_parser("revoke", help="remove an approved account")
    p.add_argument("channel")
    p.add_argument("account")
    p.set_defaults(func=_guard(_revoke))
