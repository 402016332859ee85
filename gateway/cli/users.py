"""``kith users list | show | export | delete | import``: the people kith knows, and their data.

USER is a user id, a display name (when only one person has it) or ``channel:account``. ``list``,
``show`` and ``export`` read the database and the memory files directly (a running daemon does not
mind). ``delete`` goes through the running daemon's API (``DELETE /api/users/{uid}``) so its
memory index, job bus and caches drop the person too; with no daemon it starts the parts it needs
itself (no HTTP, no adapters, no jobs). ``import`` writes the files and rows itself, then has the
index rebuilt for the new user (by the daemon when one runs). See docs/users.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from gateway.cli.common import load_or_exit
from gateway.cli.daemon import DaemonError, ask_daemon, user_path
from gateway.config import Config
from gateway.memory.files.scopes import ScopeError, root_for, user_scope
from gateway.state import State, config_state_exists, open_config_state
from gateway.util.safetext import printable

if TYPE_CHECKING:
    from gateway.app import Gateway
    from gateway.identity.import_ import ImportReport


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("users", help="the people kith knows: list, show, export, delete, import",
                            description="The people kith knows and their data. USER is a user id, a display "
                            "name (if only one person has it) or channel:account.")  # fmt: skip
    usub = parser.add_subparsers(dest="users_action", metavar="ACTION")

    p = usub.add_parser("list", help="every person: name, accounts, persona, time zone, size on disk, last seen")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_guard(_list))

    p = usub.add_parser("show", help="one person in detail")
    p.add_argument("user", metavar="USER")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_guard(_show))

    p = usub.add_parser("export", help="one archive of everything kith keeps about a person (readable without kith)")
    p.add_argument("user", metavar="USER")
    p.add_argument("-o", "--output", default=None,
                   help="archive to write: .tar.gz (default) or .zip (default: kith-user-<id>.tar.gz)")  # fmt: skip
    p.set_defaults(func=_guard(_export))

    p = usub.add_parser("delete", help="erase a person: files, rows, index points, jobs, pairing, log lines")
    p.add_argument("user", metavar="USER")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print the erase report as JSON")
    p.set_defaults(func=_guard(_delete))

    p = usub.add_parser("import", help="restore an archive made by `kith users export`")
    p.add_argument("archive", metavar="ARCHIVE")
    p.add_argument("--as", dest="as_user", default=None, metavar="USER",
                   help="user id to restore as (default: a new id)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="erase an existing user with that id first")
    p.add_argument("--approve", action="store_true",
                   help="approve the accounts the import links (an archive's approvals are never imported: "
                        "without this, each account pairs again)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the import report as JSON")
    p.set_defaults(func=_guard(_import))

    _add_login_commands(usub)
    parser.set_defaults(func=lambda a: (parser.print_help(), 2)[1])


def _add_login_commands(usub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``kith users login-link`` lives with web sign-in (gateway/cli/users_login.py)."""
    from gateway.cli import users_apikey, users_login

    users_login.add_subcommands(usub)
    users_apikey.add_subcommands(usub)  # kith users api-key: keys of /v1 (docs/openai-api.md)


class UsageError(Exception):
    """A wrong USER or argument: printed, exit 2."""


def _guard(func: Callable[[argparse.Namespace, Config], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        config = load_or_exit(args)
        try:
            return int(func(args, config))
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run


def _state(config: Config) -> State:
    if not config_state_exists(config):
        raise UsageError(f"no kith data in {config.data_dir} (no state.sqlite)")
    return open_config_state(config)


# ------------------------------------------------------------------------------------ resolve


def resolve(state: State, user: str) -> str:
    """The user id USER names: an id, ``channel:account``, or a display name only one person has."""
    if state.users.get(user) is not None:
        return user
    if ":" in user:
        channel, _, account = user.partition(":")
        found = state.identities.lookup(channel, account)
        if found is not None:
            return found
    wanted = user.casefold()
    matches = [u.user_id for u in state.users.all() if wanted in (n.casefold() for n in state.users.names(u.user_id))]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(f"{user!r} is the name of {len(matches)} people ({', '.join(matches)}): use a user id")
    raise UsageError(f"no user {user!r} (try `kith users list`)")


# --------------------------------------------------------------------------------- list / show


@dataclass
class Person:
    user_id: str
    name: str
    timezone: str
    tier: int | None
    created_at: str
    accounts: list[str]
    persona: str
    bytes: int
    files: int
    last_seen: str | None
    sessions: int
    messages: int
    facts: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _disk(root: Path) -> tuple[int, int]:
    if not root.is_dir() or root.is_symlink():
        return 0, 0
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    return len(files), sum(p.stat().st_size for p in files)


def people(state: State, config: Config) -> list[Person]:
    summaries = state.people.summaries()
    out = []
    for u in state.users.all():
        s = summaries.get(u.user_id, {})
        try:
            files, size = _disk(root_for(Path(config.data_dir), user_scope(u.user_id)))
        except ScopeError:
            files, size = 0, 0
        persona = s.get("persona") or config.personas.user_defaults.get(u.user_id) or config.personas.default
        out.append(Person(
            user_id=u.user_id, name=u.display_name, timezone=u.timezone, tier=getattr(u, "tier", None),
            created_at=u.created_at.isoformat(timespec="seconds"),
            accounts=[f"{c}:{a}" for c, a in state.identities.accounts(u.user_id)], persona=str(persona),
            bytes=size, files=files, last_seen=s.get("last_seen"), sessions=int(s.get("sessions") or 0),
            messages=int(s.get("turns") or 0), facts=int(s.get("facts") or 0),
        ))  # fmt: skip
    return out


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _list(args: argparse.Namespace, config: Config) -> int:
    state = _state(config)
    try:
        found = people(state, config)
    finally:
        state.close()
    if args.json:
        print(json.dumps([p.as_dict() for p in found], ensure_ascii=False, indent=2))
        return 0
    if not found:
        print("no users yet")
        return 0
    rows = [["USER", "NAME", "ACCOUNTS", "PERSONA", "TIME ZONE", "ON DISK", "LAST SEEN"]]
    for p in found:
        rows.append([p.user_id, printable(p.name), printable(", ".join(p.accounts)) or "-", p.persona, p.timezone,
                     _size(p.bytes), (p.last_seen or "never")[:16].replace("T", " ")])  # fmt: skip
    print(_table(rows))
    return 0


def _show(args: argparse.Namespace, config: Config) -> int:
    state = _state(config)
    try:
        uid = resolve(state, args.user)
        person = next(p for p in people(state, config) if p.user_id == uid)
    finally:
        state.close()
    if args.json:
        print(json.dumps(person.as_dict(), ensure_ascii=False, indent=2))
        return 0
    fields = [
        ("user", person.user_id), ("name", printable(person.name) or "-"),
        ("accounts", printable(", ".join(person.accounts)) or "-"), ("persona", person.persona),
        ("time zone", person.timezone), ("tier", "default" if person.tier is None else str(person.tier)),
        ("created", person.created_at), ("last seen", person.last_seen or "never"),
        ("memory", f"{person.files} files, {_size(person.bytes)} (users/{person.user_id}/)"),
        ("sessions", str(person.sessions)), ("messages", str(person.messages)), ("facts", str(person.facts)),
    ]  # fmt: skip
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        print(f"{key.ljust(width)}  {value}")
    return 0


# ------------------------------------------------------------------------------------- export


def _export(args: argparse.Namespace, config: Config) -> int:
    from gateway.identity.export import export_user

    state = _state(config)
    try:
        uid = resolve(state, args.user)
        out = Path(args.output or f"kith-user-{uid}.tar.gz")
        manifest = export_user(state, Path(config.data_dir), uid, out)
    finally:
        state.close()
    c = manifest["counts"]
    print(f"exported {uid} to {out}: {c['memory_files']} memory files, {c['messages']} messages, "
          f"{c['facts']} facts, {c['accounts']} accounts")  # fmt: skip
    return 0


# ------------------------------------------------------------------------------------- delete


def _delete(args: argparse.Namespace, config: Config) -> int:
    state = _state(config)
    missing_ok = False
    try:
        try:
            uid = resolve(state, args.user)
        except UsageError:
            # An id no longer in the database may still have leftovers (the index's files) from an
            # erase whose index step failed: every step runs again.
            if ":" in args.user or not _is_user_id(args.user):
                raise
            uid, missing_ok = args.user, True
        person = next((p for p in people(state, config) if p.user_id == uid), None)
    finally:
        state.close()
    if not args.yes:
        what = f"{uid} ({printable(person.name)}, {', '.join(person.accounts) or 'no accounts'})" if person else uid
        if not sys.stdin.isatty():
            raise UsageError("refusing to delete without --yes when not asked on a terminal")
        answer = input(f"Erase {what} and everything kith keeps about them? This cannot be undone. Type yes: ")
        if answer.strip().lower() != "yes":
            print("nothing deleted")
            return 1
    report = asyncio.run(_erase(config, uid, missing_ok=missing_ok))
    if report is None:
        return 3
    if any(link.user == uid for link in config.identity_links):
        print(f"note: {uid} is listed in identity_links: the next start creates the user again (empty); "
              "remove the entry from the config", file=sys.stderr)  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        rows = sum(int(n) for n in report["rows"].values())
        if missing_ok and not rows and not report["files"] and not report["jobs"]:
            print(f"nothing of {uid} was left; the memory index was rewritten all the same")
        else:
            print(f"erased {uid}: {rows} rows, {report['files']} files, {report['points']} index points, "
                  f"{report['jobs']} jobs, {report['log_lines']} log lines")  # fmt: skip
        for warning in report.get("warnings", []):
            print(f"warning: {warning}", file=sys.stderr)
    return 0


def _is_user_id(text: str) -> bool:
    try:
        root_for(Path("."), user_scope(text))
    except ScopeError:
        return False
    return True


async def _erase(config: Config, uid: str, *, missing_ok: bool = False) -> dict[str, Any] | None:
    from gateway.identity.erase import EraseError, erase_person
    from gateway.memory.search.index import IndexBusyError

    try:
        answered = await ask_daemon(config, "DELETE", user_path(uid),
                                    params={"missing_ok": "true" if missing_ok else "false"})
    except DaemonError as exc:
        if exc.status == 404:
            raise UsageError(f"no user {uid!r}") from None
        print(f"error: {exc}", file=sys.stderr)
        return None
    except (TimeoutError, aiohttp.ClientError) as exc:
        # The daemon carries on: rewriting a large memory index can outlast the request.
        print(f"error: no answer from the daemon in time ({exc.__class__.__name__}); it finishes the erase on its"
              f" own: `kith users show {uid}` tells when it is gone", file=sys.stderr)  # fmt: skip
        return None
    if answered is not None:
        return dict(answered)
    try:
        async with _offline(config) as gw:
            return (await erase_person(gw, uid, missing_ok=missing_ok)).as_dict()
    except IndexBusyError as exc:
        print(f"error: {exc}, and its daemon does not answer on port {config.server.port}; stop it first",
              file=sys.stderr)  # fmt: skip
        return None
    except EraseError as exc:
        raise UsageError(str(exc)) from None


def _offline(config: Config) -> Gateway:
    """A gateway for one CLI command: state, index and job bus, no HTTP, adapters or job workers."""
    from gateway.app import Gateway

    return Gateway(config, serve_http=False, supervise=False, run_jobs=False)


# ------------------------------------------------------------------------------------- import


def _import(args: argparse.Namespace, config: Config) -> int:
    from gateway.identity.import_ import ArchiveError, import_user, target_exists

    archive = Path(args.archive)
    if not archive.is_file():
        raise UsageError(f"no archive {archive}")
    data_dir = Path(config.data_dir)
    state = open_config_state(config)
    try:
        exists = args.as_user is not None and target_exists(state, data_dir, args.as_user)
    except ScopeError as exc:
        state.close()
        raise UsageError(str(exc)) from None
    if exists and not args.force:
        state.close()
        raise UsageError(f"user {args.as_user!r} exists; pass --force to erase it and import over it")
    if exists:
        state.close()
        if asyncio.run(_erase(config, args.as_user)) is None:
            return 3
        state = open_config_state(config)
    try:
        report = import_user(state, data_dir, archive, as_user=args.as_user)
        approved = _approve(state, report) if args.approve else []
    except ArchiveError as exc:
        raise UsageError(str(exc)) from None
    finally:
        state.close()
    indexed = asyncio.run(_reindex(config, report.user_id))
    if args.json:
        print(json.dumps({**report.as_dict(), "approved": approved, "indexed": indexed}, indent=2))
        return 0
    rows = report.rows
    print(f"imported {report.source_user_id or 'the archive'} as {report.user_id}: {report.files} memory files, "
          f"{rows.get('turns', 0)} messages, {rows.get('kg_facts', 0)} facts, {rows.get('identities', 0)} accounts")
    for acct in report.skipped_accounts:
        print(f"  account {printable(acct)} is someone else's here (linked, approved or pairing): not linked")
    for acct in report.linked_accounts:
        state_of = "approved (--approve)" if acct in approved else "not approved: it pairs again (docs/users.md#import)"
        print(f"  account {printable(acct)} linked; {state_of}")
    for what, n in report.left_out.items():
        print(f"  left out: {n} {what} rows (docs/users.md#import)")
    print(f"  memory index: {indexed}")
    return 0


def _approve(state: State, report: ImportReport) -> list[str]:
    """Approve the accounts the import linked: the operator's explicit choice (``--approve``), never the
    archive's. Trusted channels (the local WebSocket) need no approval and are approved all the same."""
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    for acct in report.linked_accounts:
        channel, _, account_id = acct.partition(":")
        state.access.approve(channel, account_id, display_name="", via="import", at=now)
    return list(report.linked_accounts)


async def _reindex(config: Config, uid: str) -> str:
    from gateway.memory.search.index import IndexBusyError

    try:
        answered = await ask_daemon(config, "POST", "/api/memory/reindex", {"user": uid})
    except DaemonError as exc:
        return f"not rebuilt ({exc}); run `kith memory reindex --user {uid}`"
    if answered is not None:
        return "rebuild queued on the daemon"
    try:
        async with _offline(config) as gw:
            assert gw.memory is not None
            report = await gw.memory.indexing.rebuild(user_scope(uid))
    except IndexBusyError:
        return f"the index is busy; run `kith memory reindex --user {uid}` when the daemon answers"
    return f"rebuilt ({report.embedded} chunks)"
