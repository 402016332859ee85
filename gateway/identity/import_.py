"""Restoring an export (``kith users import``): the archive is checked whole before anything is written.

Checks: a tar.gz or zip of ``kith users export`` (``manifest.json`` format and version); every member
under the one top folder, as a relative path without ``..``; only regular files and folders (no
symlinks, hard links or devices); at most ``MAX_MEMBERS`` members, ``MAX_FILE_BYTES`` each and
``MAX_TOTAL_BYTES`` in all, counted while reading (a size in a header is not trusted).

Rows: every row is checked against its table's columns and ids before anything is written
(``gateway.identity.import_rows``): a malformed value, another person's id or a session that is not the
archive's own refuses the whole archive. What is left out by rule, and said in the report:

* access approvals (``access_approved``): an imported person's accounts are approved again by the
  operator (``kith users import --approve``, or pairing), never by a file;
* an account another person holds, or that is approved or waiting for pairing without a person yet
  (someone on this instance is about to be it): not linked;
* group conversations and group sessions with their messages (they are the group's: a group's
  transcript is distilled into its shared memory), and one-to-one conversations on a channel where
  none of the imported accounts is linked (kith would deliver the person's messages there).

Writing: the memory tree is extracted into a staging folder inside the data directory, the database
rows are written in one transaction, and only then is the staging folder renamed to ``users/<id>/``;
a failure anywhere removes the staging folder and rolls the rows back, so nothing is half-written.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tarfile
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any

from gateway.identity.export import FORMAT, VERSION
from gateway.identity.import_rows import NEVER_RESTORED, RowError, Rows, check_ids, check_types, leave_out_groups
from gateway.memory.files.scopes import ScopeError, root_for, user_scope
from gateway.state import State, StorageError

MAX_MEMBERS = 100_000
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
_CHUNK = 1024 * 1024


class ArchiveError(ValueError):
    """The archive is refused (malformed, unsafe, too large) or the target exists; nothing was written."""


@dataclass
class ImportReport:
    user_id: str
    source_user_id: str
    files: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    skipped_accounts: list[str] = field(default_factory=list)  # channel:account someone else has
    linked_accounts: list[str] = field(default_factory=list)  # linked to the person, not approved by the import
    left_out: dict[str, int] = field(default_factory=dict)  # rows left out by rule, by what they are

    def as_dict(self) -> dict[str, object]:
        return {"user_id": self.user_id, "source_user_id": self.source_user_id, "files": self.files,
                "rows": self.rows, "skipped_accounts": self.skipped_accounts,
                "linked_accounts": self.linked_accounts, "left_out": self.left_out}  # fmt: skip


@dataclass
class _Member:
    name: str  # relative to the top folder, POSIX
    is_dir: bool
    open: Any  # () -> binary file object


def _members(archive: Path) -> Iterator[_Member]:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise ArchiveError(f"the archive has more than {MAX_MEMBERS} members")
            for info in infos:
                mode = (info.external_attr >> 16) & 0o170000
                if mode and mode not in (0o100000, 0o040000):
                    raise ArchiveError(f"{info.filename!r} is not a regular file or folder (a symlink?)")
                yield _Member(info.filename, info.is_dir(), lambda i=info: zf.open(i))
        return
    try:
        tar = tarfile.open(archive, "r:*")  # noqa: SIM115 - closed by the with below; opening is what may fail
    except (tarfile.TarError, OSError) as exc:
        raise ArchiveError(f"not a tar.gz or zip archive: {exc}") from None
    with tar:
        for count, info in enumerate(tar, 1):
            if count > MAX_MEMBERS:
                raise ArchiveError(f"the archive has more than {MAX_MEMBERS} members")
            if not (info.isreg() or info.isdir()):
                raise ArchiveError(f"{info.name!r} is not a regular file or folder (symlink, link or device)")
            yield _Member(info.name, info.isdir(), lambda i=info: tar.extractfile(i))


def _relative(name: str) -> tuple[str, PurePosixPath]:
    """(top folder, path under it); refuses absolute paths, ``..`` and odd names."""
    if "\\" in name or "\x00" in name:
        raise ArchiveError(f"unsafe member name {name!r}")
    p = PurePosixPath(name)
    if p.is_absolute() or any(part in ("..", "") for part in p.parts) or not p.parts:
        raise ArchiveError(f"unsafe member path {name!r} (absolute or with '..')")
    return p.parts[0], PurePosixPath(*p.parts[1:]) if len(p.parts) > 1 else PurePosixPath(".")


def _copy_capped(src: IO[bytes], dst: IO[bytes], name: str, budget: list[int]) -> None:
    size = 0
    while chunk := src.read(_CHUNK):
        size += len(chunk)
        budget[0] -= len(chunk)
        if size > MAX_FILE_BYTES:
            raise ArchiveError(f"{name!r} is larger than {MAX_FILE_BYTES} bytes")
        if budget[0] < 0:
            raise ArchiveError(f"the archive holds more than {MAX_TOTAL_BYTES} bytes")
        dst.write(chunk)


def _unpack(archive: Path, staging: Path) -> dict[str, bytes]:
    """Extract ``memory/`` into ``staging/memory`` and return the other top-level files' bytes."""
    top: str | None = None
    docs: dict[str, bytes] = {}
    budget = [MAX_TOTAL_BYTES]
    memory = staging / "memory"
    memory.mkdir(parents=True)
    for m in _members(archive):
        head, rel = _relative(m.name)
        if top is None:
            top = head
        elif head != top:
            raise ArchiveError(f"{m.name!r} is outside the archive's one top folder {top!r}")
        parts = rel.parts
        if m.is_dir or rel == PurePosixPath("."):
            continue
        if parts[0] == "memory" and len(parts) > 1:
            dest = memory.joinpath(*parts[1:])
            dest.parent.mkdir(parents=True, exist_ok=True)
            src = m.open()
            if src is None:
                raise ArchiveError(f"{m.name!r} cannot be read")
            with src, open(dest, "xb") as out:  # "x": a name twice in the archive is refused
                _copy_capped(src, out, m.name, budget)
        elif len(parts) == 1:
            src = m.open()
            if src is None:
                raise ArchiveError(f"{m.name!r} cannot be read")
            buf = _Buffer()
            with src:
                _copy_capped(src, buf, m.name, budget)
            docs[parts[0]] = bytes(buf.data)
    return docs


class _Buffer:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: bytes) -> int:
        self.data += chunk
        return len(chunk)


def read_manifest(docs: dict[str, bytes]) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    try:
        manifest = json.loads(docs["manifest.json"])
        rows = json.loads(docs["rows.json"])
    except KeyError as exc:
        raise ArchiveError(f"not a kith user export: {exc.args[0]} is missing") from None
    except ValueError as exc:
        raise ArchiveError(f"not a kith user export: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError(f"not a kith user export (manifest format is not {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise ArchiveError(f"export format version {manifest.get('version')!r}; this kith reads version {VERSION}")
    if not isinstance(rows, dict) or not all(isinstance(v, list) and all(isinstance(r, dict) for r in v)
                                             for v in rows.values()):  # fmt: skip
        raise ArchiveError("rows.json is not an object of tables holding lists of rows")
    return manifest, rows


def target_exists(state: State, data_dir: Path, user_id: str) -> bool:
    return state.users.get(user_id) is not None or root_for(data_dir, user_scope(user_id)).exists()


def import_user(state: State, data_dir: Path, archive: Path, *, as_user: str | None = None) -> ImportReport:
    """Restore ``archive`` as ``as_user`` (default: a new user id). The target must not exist (the
    caller erases it first for ``--force``)."""
    from gateway.identity.users import new_user_id

    staging = data_dir / f".import-{secrets.token_hex(6)}"
    staging.mkdir(parents=True, mode=0o700)
    try:
        try:
            docs = _unpack(archive, staging)
        except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile) as exc:
            raise ArchiveError(f"the archive cannot be unpacked: {exc}") from None
        manifest, raw = read_manifest(docs)
        if not raw.get("users"):
            raise ArchiveError("rows.json holds no user row")
        try:
            rows = check_types(raw)
            source = check_ids(rows)
        except RowError as exc:
            raise ArchiveError(str(exc)) from None
        if manifest.get("user_id") and manifest["user_id"] != source:
            raise ArchiveError(f"manifest.json names user {manifest.get('user_id')!r}, rows.json {source!r}")
        user_id = as_user or new_user_id()
        try:
            root = root_for(data_dir, user_scope(user_id))
        except ScopeError as exc:
            raise ArchiveError(str(exc)) from None
        if target_exists(state, data_dir, user_id):
            raise ArchiveError(f"user {user_id!r} exists; delete it first or pass --force")
        report = ImportReport(user_id=user_id, source_user_id=source)
        report.left_out = {t: len(raw[t]) for t in sorted(NEVER_RESTORED) if raw.get(t)}
        report.left_out.update(leave_out_groups(rows))
        _accounts(state, rows, report)
        _conversations(rows, report)
        session_ids = {}
        for r in rows.get("sessions", []):
            old = str(r["session_id"])
            session_ids[old] = uuid.uuid4().hex if state.sessions.scope_of(old) is not None else old
        report.files = sum(1 for p in (staging / "memory").rglob("*") if p.is_file())
        root.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging / "memory", root)  # same filesystem: the tree appears whole
        try:
            report.rows = state.people.restore(user_id, rows, session_ids=session_ids)
        except StorageError as exc:  # rolled back; the tree goes too
            shutil.rmtree(root, ignore_errors=True)
            raise ArchiveError(f"the archive's rows do not fit this database ({exc}); nothing was imported") from None
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return report
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _accounts(state: State, rows: Rows, report: ImportReport) -> None:
    """Keep the accounts nobody on this instance has a claim to: not linked to someone, not approved,
    not waiting in the pairing queue (an approval or a pending request without a person is someone
    about to write for the first time; an archive is no proof that the account is the archive's)."""
    waiting = {(p.channel, p.account_id) for p in state.access.pending(datetime.now(UTC))}
    kept, seen = [], set()
    for r in rows.get("identities", []):
        acct = (str(r["channel"]), str(r["account_id"]))
        if acct in seen:
            continue  # listed twice: one link
        seen.add(acct)
        if state.identities.lookup(*acct) is not None or state.access.is_approved(*acct) or acct in waiting:
            report.skipped_accounts.append(":".join(acct))
        else:
            kept.append(r)
            report.linked_accounts.append(":".join(acct))
    rows["identities"] = kept


def _conversations(rows: Rows, report: ImportReport) -> None:
    """Keep one-to-one conversations on a channel of an account the import links: kith delivers the
    person's reminders there. A group's conversation is the group's, whoever spoke in it."""
    channels = {str(r["channel"]) for r in rows.get("identities", [])}
    kept = [r for r in rows.get("conversations", []) if r["kind"] == "dm" and r["channel"] in channels
            and r["conversation_key"] == f"{r['channel']}:{r['conversation_id']}"]  # fmt: skip
    if len(kept) < len(rows.get("conversations", [])):
        report.left_out["conversations"] = len(rows["conversations"]) - len(kept)
    rows["conversations"] = kept
