"""One person's data as one archive (``kith users export``), readable without kith.

Layout (under one top folder ``kith-user-<id>/``; README.md in the archive says the same):

* ``README.md``           what each file is;
* ``manifest.json``       format name and version, the user id, when, counts;
* ``settings.json``       name, time zone, tier, persona choices, conversations kith can reach them in;
* ``accounts.json|.md``   linked accounts (channel, account id, name, since);
* ``memory/``             the Markdown tree ``users/<id>/`` as it is on disk (no lock files, no symlinks);
* ``facts.json|.md``      the knowledge graph's facts about them, current and superseded;
* ``transcript.jsonl|.md`` every stored message, by session, oldest first;
* ``rows.json``           every database row of theirs, by table: what ``kith users import`` restores.

tar.gz by default; ``.zip`` when the output name ends so. Written to a temporary file next to the
output and renamed into place, so a failed export leaves no partial archive.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.memory.files.scopes import root_for, user_scope
from gateway.state import State

FORMAT = "kith-user-export"
VERSION = 1
# lock files; undo records of /forget (what the person asked to forget); tool credentials (docs/tools.md:
# encrypted with a key the export does not carry, and a secret never leaves in an export)
SKIP_DIRS = {".locks", ".forgotten", ".credentials"}

README = """# kith export of {name} ({user_id})

Exported {at} by `kith users export`. Everything kith kept about this person is here;
every file is plain Markdown or JSON, readable without kith.

- `memory/`: the person's memory files as kith keeps them (`users/{user_id}/` in the data
  directory): `USER.md`, `MEMORY_*.md`, `WORKING.md`, `sessions/YYYY-MM-DD.md` (the raw
  conversation log), `people/`, and the `.audit.jsonl` change logs.
- `facts.md`, `facts.json`: facts kith learned (subject, predicate, object, valid from/until);
  superseded facts are kept with their end date.
- `transcript.md`, `transcript.jsonl`: every stored message, grouped by session, oldest first
  (one JSON object per line in the `.jsonl`).
- `settings.json`: display name, time zone, tier, chosen personas, the conversations kith can
  reach them in.
- `accounts.md`, `accounts.json`: the chat accounts linked to this person.
- `rows.json`: every database row of this person, by table: what `kith users import` reads back
  (checked row by row; access approvals and group sessions are not restored, docs/users.md#import).
- `manifest.json`: format `{format}` version {version}, the user id, the export time, counts.

To restore into a kith data directory: `kith users import {archive}` (a new user id) or
`kith users import {archive} --as {user_id}`.
"""


def export_user(state: State, data_dir: Path, user_id: str, out: Path) -> dict[str, Any]:
    """Write the archive of ``user_id`` to ``out`` (``.zip`` -> zip, else tar.gz); its manifest."""
    user = state.users.get(user_id)
    if user is None:
        raise LookupError(f"no user {user_id!r}")
    root = root_for(data_dir, user_scope(user_id))
    rows = state.people.rows(user_id)
    top = f"kith-user-{user_id}"
    at = datetime.now(UTC).isoformat(timespec="seconds")
    turns = rows.get("turns", [])
    facts = rows.get("kg_facts", [])
    accounts = [{k: r.get(k) for k in ("channel", "account_id", "display_name", "source", "created_at")}
                for r in rows.get("identities", [])]  # fmt: skip
    memory = list(_memory_files(root))
    manifest = {"format": FORMAT, "version": VERSION, "user_id": user_id, "exported_at": at,
                "counts": {"memory_files": len(memory), "messages": len(turns), "facts": len(facts),
                           "accounts": len(accounts), "sessions": len(rows.get("sessions", []))}}  # fmt: skip
    settings = {
        "user_id": user_id, "display_name": user.display_name, "timezone": user.timezone,
        "tier": getattr(user, "tier", None), "created_at": user.created_at.isoformat(),
        "personas": {r["conversation_key"] or "default": r["persona"] for r in rows.get("persona_choices", [])},
        "conversations": [{k: r.get(k) for k in ("conversation_key", "channel", "kind", "persona", "last_seen_at")}
                          for r in rows.get("conversations", [])],
    }  # fmt: skip
    texts: dict[str, bytes] = {
        "README.md": README.format(name=user.display_name or user_id, user_id=user_id, at=at, format=FORMAT,
                                   version=VERSION, archive=out.name).encode(),
        "manifest.json": _json(manifest),
        "settings.json": _json(settings),
        "accounts.json": _json(accounts),
        "accounts.md": _accounts_md(accounts).encode(),
        "facts.json": _json(facts),
        "facts.md": _facts_md(facts).encode(),
        "transcript.jsonl": "".join(json.dumps(_turn(t), ensure_ascii=False) + "\n" for t in turns).encode(),
        "transcript.md": _transcript_md(turns, rows.get("sessions", [])).encode(),
        "rows.json": _json(rows),
    }  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    try:
        if out.name.endswith(".zip"):
            _write_zip(Path(tmp), top, texts, memory, root)
        else:
            _write_tar(Path(tmp), top, texts, memory, root)
        os.chmod(tmp, 0o600)  # a person's whole memory: readable by its owner only
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return manifest


def _memory_files(root: Path) -> Iterator[Path]:
    """Regular files of the tree, relative; symlinks and lock files are left out."""
    if not root.is_dir() or root.is_symlink():
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not Path(dirpath, d).is_symlink())
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink():
                yield path.relative_to(root)


def _write_tar(path: Path, top: str, texts: dict[str, bytes], memory: list[Path], root: Path) -> None:
    now = time.time()
    with tarfile.open(path, "w:gz") as tar:
        for name, data in texts.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(data), now, 0o600
            tar.addfile(info, io.BytesIO(data))
        for rel in memory:
            data = (root / rel).read_bytes()
            info = tarfile.TarInfo(f"{top}/memory/{rel.as_posix()}")
            info.size, info.mtime, info.mode = len(data), (root / rel).stat().st_mtime, 0o600
            tar.addfile(info, io.BytesIO(data))


def _write_zip(path: Path, top: str, texts: dict[str, bytes], memory: list[Path], root: Path) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in texts.items():
            zf.writestr(f"{top}/{name}", data)
        for rel in memory:
            zf.writestr(f"{top}/memory/{rel.as_posix()}", (root / rel).read_bytes())


def _json(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()


def _turn(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("session_id", "seq", "turn_id", "role", "speaker", "channel", "conversation_key", "created_at", "content")
    return {k: row.get(k) for k in keys}


def _accounts_md(accounts: list[dict[str, Any]]) -> str:
    lines = ["# Linked accounts", ""]
    lines += [f"- {a['channel']}:{a['account_id']}" + (f" ({a['display_name']})" if a.get("display_name") else "")
              + f", since {a.get('created_at') or '?'}" for a in accounts] or ["(none)"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _facts_md(facts: list[dict[str, Any]]) -> str:
    lines = ["# Facts", ""]
    for f in facts:
        until = f" until {f['valid_until']}" if f.get("valid_until") else ""
        lines.append(f"- {f['subject']} {f['predicate']} {f['object']} (from {f['valid_from']}{until})")
    if not facts:
        lines.append("(none)")
    return "\n".join(lines) + "\n"


def _transcript_md(turns: list[dict[str, Any]], sessions: list[dict[str, Any]]) -> str:
    started = {s["session_id"]: s for s in sessions}
    lines = ["# Transcript"]
    current = None
    for t in turns:
        if t["session_id"] != current:
            current = t["session_id"]
            s = started.get(current, {})
            lines += ["", f"## Session {current} ({t.get('channel')}, started {s.get('started_at', '?')})", ""]
        who = t.get("speaker") or t.get("role")
        lines.append(f"**{who}** ({t.get('created_at')}):")
        lines += [f"> {line}" for line in str(t.get("content", "")).splitlines()] or [">"]
        lines.append("")
    if not turns:
        lines += ["", "(none)"]
    return "\n".join(lines) + "\n"
