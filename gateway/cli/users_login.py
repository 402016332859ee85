"""``kith users login-link USER [--operator]``: a one-time web sign-in link for a person, from the shell.

The running daemon mints the link through its operator route ``POST /api/session/links`` (operator
token, ``gateway/cli/daemon.py``), so the link's address is the one the daemon serves
(``server.public_url``, a public name, else loopback). The link works once, for 15 minutes; it is
printed on stdout only, never logged. See docs/security.md#sign-in.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from gateway.cli.common import load_or_exit
from gateway.cli.daemon import DaemonError, ask_daemon
from gateway.config import Config
from gateway.util.safetext import printable

LINKS_PATH = "/api/session/links"


def add_subcommands(users_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Called by ``gateway/cli/users.py`` with the subparsers of ``kith users``."""
    p = users_sub.add_parser("login-link", help="print a one-time web sign-in link for a user (needs the daemon)")
    p.add_argument("user", metavar="USER", help="a user id, channel:account, or a display name only one person has")
    p.add_argument("--operator", action="store_true",
                   help="the session gets the operator role (all users, pairing, quarantine)")
    p.add_argument("--json", action="store_true", help="print {url, user, operator, expires_at} as JSON")
    p.set_defaults(func=login_link)


def _user_id(config: Config, user: str) -> str:
    """USER as every ``kith users`` action reads it (gateway/cli/users.py ``resolve``), from the state file
    the daemon writes; without one, USER as given (the daemon answers whether it exists)."""
    from gateway.cli.users import resolve
    from gateway.state import config_state_exists, open_config_state

    if not config_state_exists(config):
        return user
    state = open_config_state(config)
    try:
        return resolve(state, user)
    finally:
        state.close()


def login_link(args: argparse.Namespace) -> int:
    from gateway.cli.users import UsageError

    config = load_or_exit(args)
    try:
        user_id = _user_id(config, args.user)
        out = asyncio.run(ask_daemon(config, "POST", LINKS_PATH, {"user": user_id, "operator": bool(args.operator)}))
    except UsageError as exc:
        print(f"kith users login-link: {exc}", file=sys.stderr)
        return 2
    except DaemonError as exc:
        print(f"kith users login-link: {exc}", file=sys.stderr)
        return 2
    if out is None:
        print(f"kith users login-link: no kith daemon answers on port {config.server.port} for this data dir; "
              "start it (kith run) and try again", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(out))
    else:
        role = " with the operator role" if out.get("operator") else ""
        print(f"sign-in link for {printable(str(out['user']))}{role}, valid once until {out['expires_at']}:")
        print(out["url"])
    return 0
