"""Erasing a person (``kith users delete``): nothing of theirs is left in the data directory.

In order, on a started ``Gateway`` (the daemon itself, through ``DELETE /api/users/{uid}``, or one the CLI starts
without HTTP, adapters or job workers when no daemon runs):

1. buffered writes are flushed (the session log would otherwise append to a folder just removed);
2. their jobs leave the bus: queued, delayed, backing off, dead-lettered, their cron slots
   (``gateway.bus.purge``), and the embedded server rewrites its append-only file;
3. every row that is theirs goes from the database (``State.people.erase_user``: accounts, sessions,
   transcript, facts, pairing and link entries, web sessions, progress), overwritten on disk;
4. their turns leave the session logs of the group conversations they spoke in (block and reply),
   and lines quoting one of their messages leave those groups' other files;
5. ``users/<id>/`` is removed (symlinks inside are removed, never followed);
6. their points leave the memory index, the changed group scopes are re-indexed, and the index is
   rewritten so the text leaves its files;
7. the lines that name them (their id, accounts, or a message of theirs) leave the log files of the
   data directory (``*.log``, ``*.jsonl``), each file rewritten atomically;
8. plugins are told through ``gateway_memory_edited`` (every file of theirs changed), so copies
   held in memory (the profile's session snapshots) go too.

Steps 1, 3 and 5 run a second time before 8, for a turn that was in flight meanwhile.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.bus.errors import BusError
from gateway.bus.purge import purge_jobs
from gateway.memory.files.errors import StaleWriteError
from gateway.memory.files.scopes import ScopeError, channel_scope, root_for, user_scope
from gateway.memory.files.session_log import without_turns
from gateway.memory.files.stores import Stores

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.identity")

LOG_SUFFIXES = (".log", ".jsonl")
MIN_TEXT = 12  # a message shorter than this is not looked for in logs (it would match others' lines)
MIN_ACCOUNT = 4


class EraseError(RuntimeError):
    """The person cannot be erased as asked (unknown user, bad id)."""


@dataclass
class EraseReport:
    user_id: str
    rows: dict[str, int] = field(default_factory=dict)
    files: int = 0
    jobs: int = 0
    points: int = 0
    log_lines: int = 0
    group_blocks: int = 0  # turn blocks and quoting lines taken out of group conversations' files
    accounts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # a step that could not finish (the rest still ran)

    def as_dict(self) -> dict[str, object]:
        return {"user_id": self.user_id, "rows": self.rows, "files": self.files, "jobs": self.jobs,
                "points": self.points, "log_lines": self.log_lines, "group_blocks": self.group_blocks,
                "accounts": self.accounts,
                "warnings": self.warnings}  # fmt: skip


async def erase_person(gateway: Services, user_id: str, *, missing_ok: bool = False) -> EraseReport:
    """``missing_ok``: run every step even when the database and the files no longer know the id
    (an earlier erase whose index step failed left the index's files to rewrite)."""
    state = gateway.state
    root = root_for(gateway.data_dir, user_scope(user_id))  # ScopeError for an id that names no folder
    memory = gateway.memory
    if state.users.get(user_id) is None and not root.exists() and not missing_ok:
        raise EraseError(f"no user {user_id!r}")
    report = EraseReport(user_id)
    rows = state.people.rows(user_id)
    accounts = [(str(r["channel"]), str(r["account_id"])) for r in rows.get("identities", [])]
    report.accounts = [f"{c}:{a}" for c, a in accounts]
    sessions = sorted({str(r["session_id"]) for r in rows.get("sessions", []) if r.get("session_id")})
    turns = sorted({str(r["turn_id"]) for r in rows.get("turns", []) if r.get("turn_id")})
    texts = {str(r["content"]).strip() for r in rows.get("turns", []) if r.get("role") == "user"}
    needles = _needles(user_id, accounts, texts) + turns  # an audit line names the turn it wrote

    await gateway.hooks.flush(gateway)
    paths = _files_of(root)
    job_needles = [user_id, user_scope(user_id), *sessions, *turns]
    if gateway.bus is not None:
        try:
            report.jobs = await purge_jobs(gateway.bus.redis, gateway.bus.keys, job_needles, rewrite_aof=False)
        except BusError as exc:  # the rows and files still go; the jobs find nobody and fail
            report.warnings.append(f"job bus: {exc}")
    _forget_live(gateway, user_id, sessions)
    report.rows = state.people.erase_user(user_id)
    groups = _out_of_groups(gateway, rows.get("turns", []), set(turns), texts, report)
    report.files = _remove_tree(root)
    if memory is not None and not memory.detached:
        try:
            report.points = memory.scope_count(user_scope(user_id))
            await memory.indexing.purge(user_scope(user_id))
            for scope in groups:
                await memory.indexing.sync(scope)  # the rewritten group logs replace their old chunks
            await memory.indexing.compact()
        except Exception as exc:  # e.g. too little disk space to rewrite the shard: say so, go on
            log.exception("erasing user %s from the memory index", user_id)
            report.warnings.append(f"memory index: {exc}; run `kith users delete {user_id}` again when fixed")
    report.log_lines = scrub_logs(gateway.data_dir, needles)

    # A turn in flight during the above may have written again: the second pass finds it.
    await gateway.hooks.flush(gateway)
    again = state.people.erase_user(user_id)
    for table, n in again.items():
        report.rows[table] = report.rows.get(table, 0) + n
    report.files += _remove_tree(root)
    state.people.scrub()
    # Plugins holding copies of the person's files in memory (the profile's session snapshots) drop them.
    await gateway.hooks.memory_edited(gateway, user_id=user_id, paths=paths)
    if gateway.bus is not None:
        # Jobs queued while the above ran (a job finishing during the erase queues its follow-up, a flush
        # queues an index job) go too, and only then is the append-only file rewritten without them all.
        try:
            report.jobs += await purge_jobs(gateway.bus.redis, gateway.bus.keys, job_needles,
                                            rewrite_aof=gateway.bus.server is not None)  # fmt: skip
        except BusError as exc:
            report.warnings.append(f"job bus: {exc}")
    log.info("erased user %s: %d rows, %d files, %d jobs, %d index points, %d log lines", user_id,
             sum(report.rows.values()), report.files, report.jobs, report.points, report.log_lines)  # fmt: skip
    return report


def _needles(user_id: str, accounts: Iterable[tuple[str, str]], texts: Iterable[str]) -> list[str]:
    out = [user_id]
    for channel, account in accounts:
        out.append(f"{channel}:{account}")
        if len(account) >= MIN_ACCOUNT:
            out.append(account)
    out.extend(t for t in texts if len(t) >= MIN_TEXT)
    # Each line of a multi-line message is looked for on its own (a log line holds one of them).
    out.extend(line.strip() for t in texts for line in t.splitlines() if len(line.strip()) >= MIN_TEXT)
    return sorted(set(out))


def _out_of_groups(gateway: Services, turns: list[dict[str, object]], turn_ids: set[str], texts: set[str],
                   report: EraseReport) -> list[str]:
    """Take the person's turns out of the logs of the group conversations they spoke in (their blocks,
    reply included), and the lines quoting one of their messages out of the groups' other files.
    The scopes changed."""
    changed = []
    quoted = [t.encode() for t in texts if len(t) >= MIN_TEXT]
    for key in sorted({str(t.get("conversation_key") or "") for t in turns} - {""}):
        scope = channel_scope(key)
        try:
            root = root_for(gateway.data_dir, scope)
        except ScopeError:
            continue
        if not root.is_dir() or root.is_symlink():
            continue  # a direct conversation: it has no group root
        store = Stores.of(gateway.config).unwatched(root)  # the scopes are synced whole afterwards
        touched = False
        for rel in _files_of(root):
            if not rel.endswith(".md") or rel.startswith("."):
                continue
            for _attempt in range(3):  # the session log may append meanwhile: read again and retry
                data = (root / rel).read_bytes()
                text = data.decode("utf-8", errors="replace")
                new, n = without_turns(text, turn_ids) if rel.startswith("sessions/") else (text, 0)
                lines = new.split("\n")
                kept = [ln for ln in lines if not any(q in ln.encode() for q in quoted)]
                n += len(lines) - len(kept)
                if not n:
                    break
                try:
                    store.write_if(rel, "\n".join(kept), expected_sha256=hashlib.sha256(data).hexdigest(),
                                   source="users.delete")  # fmt: skip
                except StaleWriteError:
                    continue
                report.group_blocks += n
                touched = True
                break
        if touched:
            changed.append(scope)
    return changed


def _forget_live(gateway: Services, user_id: str, sessions: Iterable[str]) -> None:
    """In-memory state of the running gateway: an Off-The-Record session, replies awaited."""
    gone = set(sessions)
    gateway.sessions.otr.pop(user_scope(user_id), None)
    awaiting = getattr(gateway.sessions, "_awaiting_reply", None)
    if isinstance(awaiting, dict):
        for turn_id in [t for t, s in awaiting.items() if s in gone]:
            awaiting.pop(turn_id, None)


def _files_of(root: Path) -> list[str]:
    if not root.is_dir() or root.is_symlink():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _remove_tree(root: Path) -> int:
    """Remove ``root`` and everything in it; a symlink is removed, never followed. Files removed."""
    if root.is_symlink() or root.is_file():
        root.unlink()
        return 1
    if not root.exists():
        return 0
    count = sum(1 for p in root.rglob("*") if p.is_file() or p.is_symlink())
    shutil.rmtree(root)
    return count


def scrub_logs(data_dir: Path, needles: Iterable[str]) -> int:
    """Remove every line naming one of ``needles`` from the log files under ``data_dir``; lines removed."""
    needles = [n for n in needles if n]
    if not needles:
        return 0
    removed = 0
    for path in _log_files(data_dir):
        try:
            data = path.read_bytes()
        except OSError as exc:
            log.warning("cannot read %s to remove the person's lines: %s", path, exc)
            continue
        encoded = [n.encode() for n in needles]
        if not any(n in data for n in encoded):
            continue
        lines = data.splitlines(keepends=True)
        kept = [line for line in lines if not any(n in line for n in encoded)]
        removed += len(lines) - len(kept)
        _rewrite(path, b"".join(kept))
    return removed


def _log_files(data_dir: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(data_dir, followlinks=False):
        dirnames[:] = [d for d in dirnames if not Path(dirpath, d).is_symlink()]
        for name in filenames:
            path = Path(dirpath, name)
            if name.endswith(LOG_SUFFIXES) and not path.is_symlink() and path.is_file():
                out.append(path)
    return sorted(out)


def _rewrite(path: Path, data: bytes) -> None:
    """Replace ``path``'s content atomically, keeping its mode (the old inode with the lines goes)."""
    mode = path.stat().st_mode & 0o777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
