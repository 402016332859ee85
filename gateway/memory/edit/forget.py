"""Forgetting on a person's request: lines of their files, facts of the graph, points of the index.

``forget(gateway, user_id, text=..., actor=...)`` finds what the text means (``match``: the
literal lines and facts, plus lines and facts that only match by meaning) and either removes it or,
when the match is broad (more than ``CONFIRM_LINES`` lines or facts, or any match by meaning), returns
``status="confirm"`` with exactly what would go and a pending id; ``forget(..., ref="pending:<id>")``
(``/forget confirm``) then removes it. ``ref`` also names one thing directly: a recall hit's chunk id
(``f:<path>#<n>``, ``t:<turn id>``), ``<path>:<line>`` or ``fact:<id>``.

Rails: only the person's own root (``user:<id>``); every file change goes through the guarded store
(containment, lock, atomic replace, an audit line with ``source="forget:<actor>"`` and the forget id);
the removed lines and facts are kept in an undo record (``undo``) for ``undo_forget``. In a
session log a removed message line becomes ``> [forgotten]``: the turn structure stays parseable.

The index follows before ``forget`` returns: each changed file is re-indexed on the indexing thread
(its points re-embedded or deleted, dense and BM25 alike), then a recall for the text deletes any point
whose text still holds it (a live turn indexed before its log block existed). Profile snapshots are
dropped through ``gateway_memory_edited``. The person's own direct-conversation transcript rows get
the matching lines replaced by ``[forgotten]`` (the live history of the prompt, and the nightly cycle,
memory writer and compaction that read it, would otherwise bring the words back); the undo puts them
back too. Callers check Off-The-Record and group rules first.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from gateway.memory.edit import undo
from gateway.memory.edit.match import (
    SEMANTIC_HITS,
    SESSION_PLACEHOLDER,
    FactMatch,
    LineMatch,
    close_lines,
    content_of,
    fold,
    is_record_file,
    lines_of_ref,
    literal_lines,
    matching_facts,
    scrub_record,
    semantic_candidates,
)
from gateway.memory.files.errors import MemoryFileNotFoundError
from gateway.memory.files.scopes import user_scope
from gateway.memory.search.index import point_id
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore
    from gateway.services import Services

log = logging.getLogger("kith.memory.forget")

Status = Literal["removed", "confirm", "nothing", "refused", "restored", "nothing_to_undo"]
CONFIRM_LINES = 5  # more lines (or facts) than this: show them and ask first
MIN_CHARS = 3
PENDING_TTL_S = 600.0
SWEEP_K = 50
SHOWN = 20  # lines listed in a chat answer; the report itself has them all
TRANSCRIPT_PLACEHOLDER = "[forgotten]"
QUOTES = "\"'\u201c\u201d\u2018\u2019\u00ab\u00bb"  # around the text: not part of what to forget


@dataclass(frozen=True, slots=True)
class ForgetReport:
    status: Status
    forget_id: str = ""
    query: str = ""
    lines: tuple[LineMatch, ...] = ()
    facts: tuple[FactMatch, ...] = ()
    points: int = 0  # index points deleted or re-embedded because their text changed
    message: str = ""
    turns: int = 0  # messages of the person's conversation history whose matching lines were replaced

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "forget_id": self.forget_id, "query": self.query,
                "lines": [m.to_dict() for m in self.lines], "facts": [m.to_dict() for m in self.facts],
                "points": self.points, "turns": self.turns, "message": self.message}  # fmt: skip

    def describe(self) -> str:
        """The answer a person reads in chat: what was (or would be) removed, line by line."""
        head = self.message
        body: list[str] = []
        for m in self.lines[:SHOWN]:
            mark = " (similar)" if m.match == "semantic" else ""
            body.append(f"- {m.path}:{m.line_no}{mark}: {_clip(content_of(m.path, m.text) or m.text)}")
        if len(self.lines) > SHOWN:
            body.append(f"- ... and {len(self.lines) - SHOWN} more lines")
        for fm in self.facts[:SHOWN]:
            f = fm.fact
            mark = " (similar)" if fm.match == "semantic" else ""
            body.append(f"- fact{mark}: {f.subject} {f.predicate} {_clip(f.object)}")
        if len(self.facts) > SHOWN:
            body.append(f"- ... and {len(self.facts) - SHOWN} more facts")
        if self.turns:
            body.append(f"- {_count(self.turns, 'message')} of our conversations (the lines replaced by"
                        f" {TRANSCRIPT_PLACEHOLDER})")
        tail = {
            "removed": "\nUndo with /forget undo (possible for 7 days).",
            "confirm": "\nReply /forget confirm to remove exactly this, or /forget cancel.",
        }.get(self.status, "")
        return "\n".join([head, *body]) + tail


@dataclass(slots=True)
class _Pending:
    forget_id: str
    text: str
    lines: tuple[LineMatch, ...]
    facts: tuple[FactMatch, ...]
    at: float = field(default_factory=time.monotonic)


PENDING: StashKey[dict[str, _Pending]] = StashKey()


def _clip(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _new_id() -> str:
    # Sorts by time: the newest undo record is the last name.
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{secrets.token_hex(3)}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _pending(gateway: Services) -> dict[str, _Pending]:
    table = gateway.stash.get(PENDING)
    if table is None:
        table = {}
        gateway.stash[PENDING] = table
    now = time.monotonic()
    for uid in [u for u, p in table.items() if now - p.at > PENDING_TTL_S]:
        del table[uid]
    return table


def cancel_pending(gateway: Services, user_id: str) -> bool:
    return _pending(gateway).pop(user_id, None) is not None


def _self_ids(gateway: Services, user_id: str) -> tuple[str, ...]:
    try:
        names = gateway.state.users.names(user_id)
    except Exception:
        names = ()
    return (user_id, "user", "me", *names)


# ------------------------------------------------------------------------------------- planning


async def plan(gateway: Services, user_id: str, text: str) -> tuple[list[LineMatch], list[FactMatch]]:
    """What forgetting ``text`` would remove (reads only)."""
    memory = gateway.memory
    assert memory is not None and gateway.kg is not None
    store = memory.stores.for_user(user_id)
    needle = fold(text)
    lines = await asyncio.to_thread(literal_lines, store, needle)
    if not memory.detached and not memory.indexing.paused:
        hits = await memory.recall(scope=user_scope(user_id), query=text, k=SEMANTIC_HITS)
        taken = {(m.path, m.line_no) for m in lines}
        candidates = await asyncio.to_thread(semantic_candidates, store, hits, taken)
        lines += await asyncio.to_thread(close_lines, memory.loader.embedder, text, candidates)
    facts = matching_facts(gateway.kg.all(user_id), needle, self_ids=_self_ids(gateway, user_id))
    lines.sort(key=lambda m: (m.path, m.line_no))
    return lines, facts


def _broad(lines: Iterable[LineMatch], facts: Iterable[FactMatch]) -> bool:
    lines, facts = list(lines), list(facts)
    fuzzy = any(m.match == "semantic" for m in lines) or any(f.match == "semantic" for f in facts)
    return fuzzy or len(lines) > CONFIRM_LINES or len(facts) > CONFIRM_LINES


async def _by_ref(gateway: Services, user_id: str, ref: str) -> tuple[list[LineMatch], list[FactMatch]]:
    memory, kg = gateway.memory, gateway.kg
    assert memory is not None and kg is not None
    if ref.startswith("fact:"):
        fact = kg.get(int(ref[5:])) if ref[5:].isdigit() else None
        return [], [FactMatch(fact, "literal")] if fact is not None and fact.user_id == user_id else []
    store = memory.stores.for_user(user_id)
    return await asyncio.to_thread(lines_of_ref, store, ref), []


# ---------------------------------------------------------------------------------- the transcript


def redacted(content: str, needle: str) -> str | None:
    """``content`` with every line holding ``needle`` replaced (None when no line does)."""
    rows = content.splitlines(keepends=True)
    out = [TRANSCRIPT_PLACEHOLDER + r[len(r.rstrip("\r\n")):] if needle in fold(r) else r for r in rows]
    return "".join(out) if out != rows else None


def transcript_rows(gateway: Services, user_id: str, query: str) -> list[dict[str, Any]]:
    """The person's own direct-conversation messages with a line holding ``query``: the nightly cycle,
    the memory writer and compaction read the transcript, and would learn a forgotten line again."""
    needle = fold(query)
    if not needle:
        return []
    return [{"seq": seq, "content": c} for seq, c in gateway.state.turns.rows_with_words(user_id, query)
            if redacted(c, needle) is not None]  # fmt: skip


# -------------------------------------------------------------------------------------- applying


def _rewrite(store: MemoryStore, lines: list[LineMatch], needle: str) -> list[dict[str, Any]]:
    """Remove the lines from their files (blocking); returns the undo entries of the files changed."""
    by_path: dict[str, list[LineMatch]] = {}
    for m in lines:
        by_path.setdefault(m.path, []).append(m)
    planned: list[tuple[str, str, str, list[dict[str, Any]]]] = []
    for path, matches in sorted(by_path.items()):
        try:
            before = store.read(path)
        except MemoryFileNotFoundError:
            continue
        rows = before.splitlines(keepends=True)
        chosen: dict[int, LineMatch] = {}
        for m in matches:
            idx = m.line_no - 1
            if not (0 <= idx < len(rows) and rows[idx].rstrip("\r\n") == m.text and idx not in chosen):
                # The file moved since the plan: the same line elsewhere, else it is already gone.
                idx = next((i for i, r in enumerate(rows) if r.rstrip("\r\n") == m.text and i not in chosen), -1)
            if idx >= 0:
                chosen[idx] = m
        if not chosen:
            continue
        removed: list[dict[str, Any]] = []
        out: list[str] = []
        for i, row in enumerate(rows):
            if i not in chosen:
                out.append(row)
                continue
            text = row.rstrip("\r\n")
            # A session log keeps its turn structure; a JSON-lines record keeps its other fields.
            instead = (SESSION_PLACEHOLDER if path.startswith("sessions/")
                       else scrub_record(text, needle or fold(content_of(path, text) or text))
                       if is_record_file(path) else "")  # fmt: skip
            removed.append({"line": i + 1, "text": text, "replaced_with": instead})
            if instead:
                out.append(instead + row[len(text):])
        planned.append((path, before, "".join(out), removed))
    return [{"path": p, "before": b, "after": a, "removed": r} for p, b, a, r in planned]


async def _reindex(gateway: Services, user_id: str, paths: list[str], text: str) -> int:
    """Bring the index in step now (not when the bus gets to it): the next recall must not find it."""
    memory = gateway.memory
    assert memory is not None
    if memory.detached:
        return 0
    scope = user_scope(user_id)
    points = 0
    for path in paths:
        report = await memory.indexing.index_file(scope, path)
        points += report.deleted + report.embedded
    if not text or memory.indexing.paused:
        return points
    needle = fold(text)
    try:
        hits = await memory.recall(scope=scope, query=text, k=SWEEP_K)
        stale = [point_id(h.scope, h.chunk_id) for h in hits if needle in fold(h.text)]
        if stale:
            # Points whose text holds the forgotten words but no file does (a turn indexed live before
            # its log block was written, or a log block forgotten by hand): nothing would re-create them.
            log.info("forget: %d index points outside any changed file removed for %s", len(stale), scope)
            await asyncio.to_thread(memory.loader.index.delete_ids, stale)
    except Exception:
        # The files are forgotten already; an orphan point is purged by the root's next sync.
        log.exception("forget: sweeping the index of %s failed", scope)
        return points
    return points + len(stale)


async def _apply(gateway: Services, user_id: str, lines: list[LineMatch], facts: list[FactMatch], *, query: str,
                 actor: str, forget_id: str = "") -> ForgetReport:  # fmt: skip
    memory, kg = gateway.memory, gateway.kg
    assert memory is not None and kg is not None
    forget_id = forget_id or _new_id()
    store = memory.stores.for_user(user_id)
    files = await asyncio.to_thread(_rewrite, store, lines, fold(query))
    record = {
        "id": forget_id, "ts": datetime.now(UTC).isoformat(), "actor": actor, "user_id": user_id, "query": query,
        "files": [{"path": f["path"], "before": f["before"], "after_sha256": _sha(f["after"]),
                   "removed": f["removed"]} for f in files],
        "facts": [fm.fact.as_dict() | {"source_type": fm.fact.source_type, "source_ref": fm.fact.source_ref}
                  for fm in facts],
        "turns": transcript_rows(gateway, user_id, query),
    }  # fmt: skip
    if files or facts or record["turns"]:
        # The undo record first: a crash after it leaves a forget that can still be undone.
        await asyncio.to_thread(undo.save, store.root, record)
    for row in record["turns"]:
        gateway.state.turns.set_content(user_id, row["seq"], redacted(row["content"], fold(query)) or row["content"])
    for f in files:
        await asyncio.to_thread(store.write, f["path"], f["after"], source=f"forget:{actor}", message_id=forget_id,
                                trust="user")  # fmt: skip
    for fm in facts:
        kg.delete(fm.fact.id)
    kinds = {(m.path, m.text): m.match for m in lines}
    done_lines = tuple(LineMatch(f["path"], r["line"], r["text"], kinds.get((f["path"], r["text"]), "literal"))
                       for f in files for r in f["removed"])  # fmt: skip
    paths = [f["path"] for f in files]
    points = await _reindex(gateway, user_id, paths, query)
    await gateway.hooks.memory_edited(gateway, user_id=user_id, paths=paths)
    # A changed file counts even when its points were replaced by the file's own memory.index job
    # before _reindex got to it (which then found nothing to do): its old points are only flagged
    # deleted, and their text stays in the index files until the compaction.
    await _queue_scrub(gateway, forget_id, turns=bool(record["turns"]), points=points + len(paths))
    await asyncio.to_thread(undo.expire, store.root)
    n_lines = sum(len(f["removed"]) for f in files)
    log.info("forget %s for %s by %s: %d lines in %d files, %d facts, %d index points", forget_id, user_id, actor,
             n_lines, len(files), len(facts), points)  # fmt: skip
    n_turns = len(record["turns"])
    if not n_lines and not facts and not n_turns:
        return ForgetReport("nothing", forget_id, query, points=points,
                            message="Nothing in your memory matches that any more.")  # fmt: skip
    what = _count(n_lines, "line") + (f" and {_count(len(facts), 'fact')}" if facts else "")
    return ForgetReport("removed", forget_id, query, done_lines, tuple(facts), points,
                        f"Forgotten: {what}.", n_turns)  # fmt: skip


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


#: The bus job that rewrites what a forget leaves on disk (``plugins/memory_index.py`` registers it).
SCRUB_JOB = "memory.scrub"


async def _queue_scrub(gateway: Services, forget_id: str, *, turns: bool, points: int) -> None:
    """What is left on disk goes in a job of its own: rewriting the index files and merging the
    full-text index take seconds on a big data dir, longer than a ``/forget`` may keep the person
    waiting (its command deadline). The forget is done before it (the text is gone from every file,
    row and search); the job only leaves no copy of it in free pages or old index segments, and the
    bus retries it if it fails."""
    if not turns and not points:
        return
    if gateway.bus is None or SCRUB_JOB not in gateway.bus.specs:  # no bus, or its plugin denied
        await scrub(gateway, turns=turns, points=points)
        return
    await gateway.bus.enqueue(SCRUB_JOB, {"turns": turns, "points": points}, job_id=f"scrub-{forget_id}")


async def scrub(gateway: Services, *, turns: bool, points: int) -> None:
    """No copy of what was forgotten outside the undo record, as ``kith users delete`` leaves none of a
    person (issue 28): the transcript's full-text segments merged and the freed pages overwritten, the
    index files rewritten without the deleted points."""
    if turns:
        await asyncio.to_thread(gateway.state.people.scrub, merge_search=True)
    if points and gateway.memory is not None and not gateway.memory.detached:
        await gateway.memory.indexing.compact()


async def forget(gateway: Services, user_id: str, *, text: str | None = None, ref: str | None = None, actor: str,
                 confirm: bool = False) -> ForgetReport:  # fmt: skip
    """Forget what ``text`` matches (or what ``ref`` names) in the person's own memory.

    A broad match is not applied unless ``confirm``: the report (``status="confirm"``) lists it and
    keeps it as ``pending:<forget_id>`` for ``PENDING_TTL_S``; ``ref="pending:<id>"`` applies exactly
    that list (``/forget confirm``)."""
    if gateway.memory is None or gateway.kg is None:
        raise RuntimeError("the gateway's memory is not running")
    await gateway.hooks.flush(gateway)  # buffered session-log blocks are files too
    if ref:
        ref = ref.strip()
        if ref.startswith("pending:"):
            pending = _pending(gateway).get(user_id)
            if pending is None or (ref != "pending:" and ref[8:] != pending.forget_id):
                return ForgetReport("refused", message="Nothing is waiting for confirmation (it expires after"
                                                        " 10 minutes); send /forget TEXT again.")  # fmt: skip
            del _pending(gateway)[user_id]
            return await _apply(gateway, user_id, list(pending.lines), list(pending.facts), query=pending.text,
                                actor=actor, forget_id=pending.forget_id)  # fmt: skip
        lines, facts = await _by_ref(gateway, user_id, ref)
        if not lines and not facts:
            return ForgetReport("nothing", query=ref, message=f"Nothing in your memory is {ref!r}.")
        texts = [content_of(m.path, m.text) or "" for m in lines]
        sweep = texts[0] if len(texts) == 1 else ""
        report = await _apply(gateway, user_id, lines, facts, query=sweep, actor=actor)
        return report if report.query else _with_query(report, ref)
    query = " ".join((text or "").split()).strip(QUOTES)  # /forget "my locker code"
    if len(fold(query)) < MIN_CHARS:
        return ForgetReport("refused", query=query, message="Tell me what to forget (at least a few letters).")
    lines, facts = await plan(gateway, user_id, query)
    if not lines and not facts and not transcript_rows(gateway, user_id, query):
        return ForgetReport("nothing", query=query, message="Nothing in your memory matches that.")
    if _broad(lines, facts) and not confirm:
        pending = _Pending(_new_id(), query, tuple(lines), tuple(facts))
        _pending(gateway)[user_id] = pending
        what = _count(len(lines), "line") + (f" and {_count(len(facts), 'fact')}" if facts else "")
        return ForgetReport("confirm", pending.forget_id, query, tuple(lines), tuple(facts),
                            message=f"This would forget {what}; lines marked (similar) match by meaning, not"
                                    " by the exact words:")  # fmt: skip
    return await _apply(gateway, user_id, lines, facts, query=query, actor=actor)


def _with_query(report: ForgetReport, query: str) -> ForgetReport:
    return ForgetReport(report.status, report.forget_id, query, report.lines, report.facts, report.points,
                        report.message)  # fmt: skip


# ------------------------------------------------------------------------------------------- undo


async def undo_forget(gateway: Services, user_id: str, forget_id: str | None = None, *, actor: str) -> ForgetReport:
    """Put back what a forget removed (the newest one when ``forget_id`` is None)."""
    memory, kg = gateway.memory, gateway.kg
    if memory is None or kg is None:
        raise RuntimeError("the gateway's memory is not running")
    store = memory.stores.for_user(user_id)
    record = await asyncio.to_thread(undo.load, store.root, forget_id)
    if record is None or record.get("user_id") != user_id:
        return ForgetReport("nothing_to_undo", message="There is no forget to undo (undo is kept for 7 days).")
    fid = str(record["id"])
    paths: list[str] = []
    restored = 0
    for entry in record.get("files", []):
        path = str(entry["path"])
        try:
            current: str | None = await asyncio.to_thread(store.read, path)
        except MemoryFileNotFoundError:
            current = None
        text = undo.restore_text(current, entry)
        await asyncio.to_thread(store.write, path, text, source=f"forget-undo:{actor}", message_id=fid, trust="user")
        paths.append(path)
        restored += len(entry.get("removed", []))
    facts = 0
    for f in record.get("facts", []):
        try:
            kg.add(user_id, f["subject"], f["predicate"], f["object"], valid_from=f["valid_from"],
                   valid_until=f.get("valid_until"), confidence=float(f.get("confidence", 1.0)),
                   source_type=str(f.get("source_type") or "manual"), source_ref=str(f.get("source_ref") or ""))
            facts += 1
        except (KeyError, ValueError) as exc:
            log.warning("forget undo %s: fact %r not restored: %s", fid, f, exc)
    turns = 0
    for row in record.get("turns", []):
        turns += gateway.state.turns.set_content(user_id, int(row["seq"]), str(row["content"]))
    await asyncio.to_thread(undo.drop, store.root, fid)
    await _reindex(gateway, user_id, paths, "")
    await gateway.hooks.memory_edited(gateway, user_id=user_id, paths=paths)
    log.info("forget %s undone for %s by %s: %d lines, %d facts", fid, user_id, actor, restored, facts)
    what = _count(restored, "line") + (f" and {_count(facts, 'fact')}" if facts else "")
    return ForgetReport("restored", fid, str(record.get("query", "")),
                        message=f"Restored {what} of the forget of {record.get('query') or 'a selection'!r}.")
