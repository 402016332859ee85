"""How the memory writer changes a person's notes: by validated line ops, never by a rewrite (issue 28).

A model's "complete new note" once replaced ``people/`` and ``topics/`` files whole, so a careless
answer erased every line it left out, including lines the prompt had cut or never shown. Now:

* what the prompt shows of a note is recorded (``Note``): the note's first lines up to a budget, whole
  lines only; the rest is said to be hidden and stays as it is;
* the model answers with curation ops (``append``, ``replace``, ``remove``, ``add_heading``), applied
  by ``gateway.memory.curation`` under its rails (a removal budget, a cap on ops, the poisoning
  screen) plus one of the writer's own (``admit_for``): a ``remove`` or ``replace`` must quote, exactly,
  a line the model was shown; ``remove_heading`` (a whole section at once) is not a writer op;
* an answer in the old shape (``content``: the complete note) is merged, not written: its lines that
  the note lacks are appended, the note's lines it leaves out are kept (``content_ops``);
* every file the run changes gets the curation audit (``<file>.audit.jsonl``, one ``run`` record with
  the hashes before and after) and a pre-run copy under ``_history/``; a journal of writer runs
  (``_history/writer.audit.jsonl``) lists the files of each run, so ``rollback_run`` undoes a run as a
  whole, refusing (unless forced) when one of its files changed since.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from gateway.memory.curation import Admit, Rails, RollbackResult, audit, rollback
from gateway.memory.curation.doc import norm, parse
from gateway.memory.files.store import MemoryStore

JOURNAL = "_history/writer"  # its audit: _history/writer.audit.jsonl, one "writer_run" record per run
# People and topic notes have free-form sections; the rest of the rails are curation's.
NOTE_RAILS = Rails(max_ops=30, max_remove_fraction=0.25, allow_new_sections=True)
WRITER_OPS = frozenset({"append", "replace", "remove", "add_heading"})
DEFAULT_SECTION = "Notes"
MAX_SHOWN_FILE = 12_000  # characters of one note in the prompt; longer notes are shown in part
MAX_SHOWN_TOTAL = 48_000  # characters of all notes in one prompt
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Note:
    """One note as the prompt shows it. ``bullets``: match keys of the lines an op may quote."""

    rel: str
    title: str
    text: str  # the whole current file ("" when it does not exist yet)
    shown: str  # the part in the prompt
    hidden: int  # lines of the file not in the prompt
    bullets: frozenset[str]

    @property
    def exists(self) -> bool:
        return bool(self.text)


def title_of(text: str, fallback: str) -> str:
    first = text.lstrip().split("\n", 1)[0]
    return first[2:].strip() if first.startswith("# ") and first[2:].strip() else fallback


def show(rel: str, text: str, limit: int, *, fallback_title: str = "") -> Note:
    """The first whole lines of ``text`` that fit in ``limit`` characters (none past a cut line)."""
    lines = text.splitlines()
    used, taken = 0, 0
    for line in lines:
        if used + len(line) + 1 > limit:
            break
        used += len(line) + 1
        taken += 1
    shown = "\n".join(lines[:taken])
    doc = parse(shown)
    bullets = frozenset(norm(b.text) for s in doc.sections for b in s.bullets())
    title = title_of(text, fallback_title or rel.rsplit("/", 1)[-1].removesuffix(".md"))
    return Note(rel=rel, title=title, text=text, shown=shown, hidden=len(lines) - taken, bullets=bullets)


def render(note: Note) -> list[str]:
    if not note.exists:
        return []
    out = ["", f"CURRENT NOTE {note.rel}:", note.shown or "(not shown)"]
    if note.hidden:
        out.append(f"({note.hidden} more lines not shown: they stay as they are; you can only append to them)")
    return out


def admit_for(note: Note) -> Admit:
    """The writer's rail on each op: only its ops, and a line removed or replaced is quoted exactly
    from what the prompt showed of this note."""

    def admit(op: dict[str, str]) -> str | None:
        if op["op"] not in WRITER_OPS:
            return f"op_not_allowed: {op['op']!r} is not a memory-writer op"
        quoted = op.get("text") if op["op"] == "remove" else op.get("old") if op["op"] == "replace" else None
        if quoted is not None and norm(quoted) not in note.bullets:
            return f"not_shown: {quoted[:80]!r} is not a line of {note.rel} as shown; quote a shown line exactly"
        return None

    return admit


def _line_key(line: str) -> str:
    return norm(_BULLET.sub("", line, count=1))


def content_ops(content: str, note: Note) -> tuple[list[dict[str, str]], int, int]:
    """A whole note (the old answer shape) as appends of its new lines, under its ``##`` headings.

    Returns (ops, lines appended, lines of the note it left out, which are kept)."""
    have = {_line_key(ln) for ln in note.text.splitlines() if ln.strip()}
    section = DEFAULT_SECTION
    ops: list[dict[str, str]] = []
    given: set[str] = set()
    for line in content.splitlines():
        head = _HEADING.match(line.strip())
        if head:
            if len(head.group(1)) == 2 and head.group(2):
                section = head.group(2)
            continue  # the title and ### subheadings: the new lines go under their ## section
        key = _line_key(line)
        if not key:
            continue
        given.add(key)
        if key not in have:
            have.add(key)
            ops.append({"op": "append", "section": section, "text": _BULLET.sub("", line.strip(), count=1)})
    body = [ln for ln in note.text.splitlines() if ln.strip() and not _HEADING.match(ln.strip())]
    left_out = sum(1 for ln in body if _line_key(ln) not in given)
    return ops, len(ops), left_out


def audited_write(store: MemoryStore, rel: str, text: str, *, run_id: str, source: str, message_id: str = "",
                  trust: str = "system", now: datetime | None = None) -> bool:  # fmt: skip
    """Replace a whole file the writer owns (the slot summary, the alias map) the way ``curate``
    writes: pre-run copy, then a ``run`` audit record, then the file. False when nothing changes."""
    pre_exists = store.exists(rel)
    before = store.read(rel) if pre_exists else ""
    if pre_exists and before == text:
        return False
    backup = audit.save_backup(store, rel, before, source=source)
    record = {"type": "run", "run_id": run_id, "ts": (now or datetime.now(UTC)).isoformat(), "file": rel,
              "written": True, "pre_exists": pre_exists, "pre_sha256": audit.sha256_text(before),
              "post_sha256": audit.sha256_text(text), "backup": backup, "applied": 1, "rejected": 0}  # fmt: skip
    audit.append_records(store, rel, [record], source=source)
    store.write(rel, text, source=source, message_id=message_id, trust=trust)
    return True


def journal(store: MemoryStore, run_id: str, *, session_id: str, rows: str, files: Iterable[str], source: str,
            now: datetime | None = None) -> None:  # fmt: skip
    """Record a run's files before it writes them: a crash part-way leaves a run rollback understands."""
    record = {"type": "writer_run", "run_id": run_id, "ts": (now or datetime.now(UTC)).isoformat(),
              "session_id": session_id, "rows": rows, "files": sorted(set(files))}  # fmt: skip
    audit.append_records(store, JOURNAL, [record], source=source)


def note_rollback(store: MemoryStore, run_id: str, *, now: datetime | None = None) -> None:
    """Mark a writer run undone in the journal (so "the latest run" means the latest not undone)."""
    record = {"type": "rollback", "run_id": run_id, "ts": (now or datetime.now(UTC)).isoformat()}
    audit.append_records(store, JOURNAL, [record], source="memory_writer-rollback")


def runs(store: MemoryStore) -> list[dict[str, Any]]:
    """Writer runs, oldest first."""
    return [r for r in audit.read_records(store, JOURNAL) if r.get("type") == "writer_run"]


RunStatus = Literal["restored", "already_restored", "nothing_to_undo", "conflict", "unknown_run", "no_backup"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRollback:
    file: str
    status: str  # curation's RollbackStatus
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRollback:
    run_id: str
    status: RunStatus
    files: tuple[FileRollback, ...] = ()
    detail: str = ""


def _file_state(store: MemoryStore, rel: str, run_id: str) -> str:
    """What undoing ``run_id`` would do to ``rel``: unknown_run, nothing_to_undo, already_restored,
    conflict or restore."""
    run = next((r for r in audit.read_records(store, rel) if r.get("type") == "run" and r.get("run_id") == run_id),
               None)  # fmt: skip
    if run is None:
        return "unknown_run"  # the run was cut short before it reached this file
    if not run.get("written"):
        return "nothing_to_undo"
    current = audit.sha256_text(store.read(rel)) if store.exists(rel) else None
    pre = run["pre_sha256"] if run.get("pre_exists", True) else None
    if current == pre:
        return "already_restored"
    return "restore" if current == run["post_sha256"] else "conflict"


def rollback_run(store: MemoryStore, run_id: str, *, force: bool = False) -> RunRollback:
    """Restore every file of writer run ``run_id`` to what it was before the run, or none of them:
    when one changed since (``conflict``), nothing is restored unless ``force``."""
    run = next((r for r in runs(store) if r.get("run_id") == run_id), None)
    if run is None:
        return RunRollback(run_id=run_id, status="unknown_run", detail="no such writer run in the journal")
    files = [str(f) for f in run.get("files", [])]
    states = {rel: _file_state(store, rel, run_id) for rel in files}
    conflicts = [rel for rel, s in states.items() if s == "conflict"]
    if conflicts and not force:
        return RunRollback(run_id=run_id, status="conflict", detail=f"changed since the run: {', '.join(conflicts)}")
    results: list[RollbackResult] = []
    for rel in files:
        if states[rel] in ("restore", "conflict"):
            results.append(rollback(store, run_id, rel=rel, force=force))
        elif states[rel] == "already_restored":
            results.append(RollbackResult(run_id=run_id, status="already_restored"))
        else:
            results.append(RollbackResult(run_id=run_id, status="nothing_to_undo", detail=states[rel]))
    named = tuple(FileRollback(file=f, status=r.status, detail=r.detail) for f, r in zip(files, results, strict=True))
    statuses = {r.status for r in results}
    if "no_backup" in statuses:
        status: RunStatus = "no_backup"
    elif "restored" in statuses:
        status = "restored"
    elif "already_restored" in statuses:
        status = "already_restored"
    else:
        status = "nothing_to_undo"
    return RunRollback(run_id=run_id, status=status, files=named)
