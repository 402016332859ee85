"""The nightly sleep cycle of one scope (a user, or a group conversation).

Stages, each recorded in ``bg_sleep_runs`` so a retry resumes instead of repeating:

1. **extract**: the turns since the scope's watermark and before the night's instant, fitted into a
   character budget (``daybook``), go to the model in one structured call (MEMORIES / FACTS /
   TOPICS). The raw answer is stored with the batch boundary. Model unavailable or output unusable
   (nothing parseable, over the size cap, cut off at the token limit): the job raises, nothing is
   stored or written, and the bus
   retries it; the watermark has not moved, so a later night still covers these turns.
2. **apply**: accepted memory lines go to ``memories/<day>.md`` under a ``## Night of <slot>`` block
   (written once: a block already in the file is not written again; lines already in the file are
   skipped), flagged lines to ``QUARANTINE.jsonl``, facts into the knowledge graph with
   ``source_ref = sleep:<scope>:<slot>`` (a replay returns the existing row).
3. **curate** (users only): USER.md and PATTERNS.md operations under rails, with run id ``sleep-<slot>``; a run id
   already in the audit is not run again. A curation failure is logged and does not fail the night.
4. **done**: the watermark moves past the batch and the stored answer is dropped, in one transaction.

So a crash anywhere, followed by the retry, neither loses nor duplicates memories or facts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, tzinfo
from typing import Any, Literal

from gateway.memory.background import schemas
from gateway.memory.background.ask import ask
from gateway.memory.background.daybook import DayBook, gather, read_turns
from gateway.memory.background.model_output import Extraction, load_json, parse_extraction
from gateway.memory.background.retention_cutoff import local_today
from gateway.memory.background.settings import RailsConfig, SleepConfig
from gateway.memory.background.writer import TRUNCATED
from gateway.memory.curation import Rails, curate
from gateway.memory.curation import audit as curation_audit
from gateway.memory.files import dated
from gateway.memory.files.poison import MemoryLine, Provenance, Quarantined, screen_text
from gateway.memory.files.quarantine import filter_lines, record
from gateway.memory.files.store import MemoryStore
from gateway.memory.knowledge.graph import KnowledgeGraph
from gateway.memory.knowledge.predicates import SUGGESTED, normalize_entity
from gateway.state import SleepRun, State

log = logging.getLogger("kith.memory.sleep")
SOURCE = "sleep_cycle"
_SELF = {"user", "the user", "me", "i", "myself"}
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")

EXTRACT_SYSTEM = """You consolidate a day of conversations into long-term memory for a personal \
assistant. Answer in exactly three labelled sections and nothing else:

MEMORIES:
- one self-contained statement per bullet: what happened, was decided, planned or learned. Dates \
absolute. Skip small talk and anything already in the profile.
FACTS:
A JSON list of {"subject", "predicate", "object", "valid_from"?, "valid_until"?, "confidence"?}. \
Predicates in snake_case; prefer: {predicates}. Dates as YYYY-MM-DD.
TOPICS:
A JSON object mapping each topic of the day to its weight (0..1).

Statements describe people and things; never write instructions to the assistant."""

CURATE_SYSTEM = """You keep a person's profile (USER.md) accurate and short. You receive the \
current profile, what was learned recently, and the known facts. Answer with JSON only: \
{"ops": [...]} where each op is one of
{"op": "append", "section": S, "text": T} | {"op": "replace", "section": S, "old": T, "new": T} |
{"op": "remove", "section": S, "text": T} | {"op": "add_heading", "section": S} |
{"op": "remove_heading", "section": S}; optional "subheading" targets a ### subsection.
Only durable things about the person belong there. Return {"ops": []} when nothing changes.
Stable behavioural patterns (routines, habits, when and how they like to talk, what they do again and \
again: seen on several days, not once) go to PATTERNS.md instead: add them as "patterns": [...], \
ops of the same shape, with sections among {pattern_sections}."""
PATTERNS = "PATTERNS.md"
# Curation also reads the dated memories of the last days, not only tonight's (seed 004): a pattern
# shows across days, and a line the profile lacks may have been learnt the night before.
CURATION_DATED_DAYS = 3
CURATION_DATED_CHARS = 8000
PATTERN_SECTIONS = ("Routines", "Habits", "Communication", "Schedule", "Work", "Notes")


@dataclass(frozen=True, slots=True, kw_only=True)
class NightScope:
    """Who a night is for. ``key``: ``user:<id>`` or ``channel:<conversation key>`` (progress and
    provenance); ``sessions``: the session scope key read from the transcript; ``kg_scope``: the
    knowledge-graph scope; ``self_names``: how the subject "the user" is written in facts."""

    key: str
    sessions: str
    kg_scope: str
    self_id: str = ""
    self_names: tuple[str, ...] = ()
    curate: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class NightResult:
    status: Literal["done", "already_done", "nothing_to_do"]
    scope: str
    slot: str
    day: str = ""
    turns: int = 0
    memories: int = 0
    facts: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    curation: str = ""
    errors: tuple[str, ...] = ()


class ExtractionError(Exception):
    """The model's answer could not be used; nothing was written. The job is retried."""


def _prompt(book: DayBook, scope: NightScope, profile: str) -> str:
    who = ""
    if scope.self_id:
        names = ", ".join(n for n in scope.self_names if n) or scope.self_id
        who = f"The person this memory belongs to: {names}. Use {scope.self_id!r} as the subject of facts about them.\n"
    known = f"\nCURRENT PROFILE (USER.md):\n{profile or '(empty)'}\n" if scope.self_id else ""
    return f"{who}{known}\nTHE DAY'S CONVERSATIONS:\n{book.text}"


async def _extract(
    state: State, scope: NightScope, slot: str, before: datetime, tz: tzinfo, store: MemoryStore, provider: Any,
    cfg: SleepConfig,
) -> SleepRun | None:  # fmt: skip
    after = state.sleep_runs.last_seq(scope.key)
    rows = read_turns(state, scope_key=scope.sessions, after_seq=after, before=before)
    book = gather(rows, budget=cfg.char_budget, interactive_share=cfg.interactive_share,
                  head_share=cfg.head_share, automated_channels=cfg.automated_channels, tz=tz)  # fmt: skip
    if book.empty:
        return None
    profile = await asyncio.to_thread(_read, store, "USER.md") if scope.self_id else ""
    system = EXTRACT_SYSTEM.replace("{predicates}", ", ".join(SUGGESTED))
    response = await ask(provider, source=SOURCE, system=system, prompt=_prompt(book, scope, profile),
                         role=cfg.backend, max_tokens=cfg.max_tokens, schema=schemas.EXTRACTION)  # fmt: skip
    if response.stop_reason in TRUNCATED:
        # The answer stops at the token limit: what it did not get to would be lost for good once the
        # watermark moved past these turns, so nothing is taken from it and the job is retried.
        raise ExtractionError(f"extraction for {scope.key} {slot} was cut off at the token limit "
                              f"(background.sleep.max_tokens {cfg.max_tokens})")  # fmt: skip
    parsed = parse_extraction(response.text)
    if parsed.truncated or (parsed.empty and parsed.errors):
        raise ExtractionError(f"unusable extraction for {scope.key} {slot}: {'; '.join(parsed.errors)[:500]}")
    if parsed.errors:
        log.warning("sleep cycle %s %s: extraction problems: %s", scope.key, slot, "; ".join(parsed.errors))
    assert book.last_at is not None
    run = SleepRun(
        scope=scope.key, slot=slot, day=book.last_at.astimezone(tz).date().isoformat(), first_seq=book.first_seq,
        upto_seq=book.upto_seq, turns=book.turns, output=response.text, stage="extracted",
        detail="; ".join(parsed.errors)[:500],
    )  # fmt: skip
    state.sleep_runs.save_extraction(run)
    return run


def _read(store: MemoryStore, rel: str) -> str:
    return store.read(rel) if store.exists(rel) else ""


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip(".")


def write_memories(store: MemoryStore, run: SleepRun, ex: Extraction, prov: Provenance) -> tuple[int, int]:
    """Add the night's block to ``memories/<day>.md``; (lines written, lines quarantined)."""
    rel = f"memories/{run.day}.md"
    current = _read(store, rel)
    heading = f"## Night of {run.slot}"
    if heading in current.splitlines():
        return 0, 0  # written by an earlier delivery of this job
    accepted = filter_lines(store, ex.memories, prov)
    quarantined = len(ex.memories) - len(accepted)
    present = {_norm(m.group(1)) for ln in current.splitlines() if (m := _BULLET.match(ln))}
    fresh = [line for line in accepted if _norm(line) not in present]
    if not fresh:
        return 0, quarantined
    topics = ", ".join(t for t, _ in sorted(ex.topics.items(), key=lambda kv: -kv[1])[:5])
    # Provenance: the heading names the night (source_ref sleep:<scope>:<slot>, rows in bg_sleep_runs)
    # and the store's audit line carries the ref and the trust level; no comment noise in recall text.
    # The night's entities (its facts' subjects and objects, the person left out): with the topics,
    # the index keeps them as payload fields that `kith memory search --entity/--topic` filter on.
    selves = {normalize_entity(n) for n in _SELF}
    names = dict.fromkeys(e.strip() for f in ex.facts for e in (f.subject, f.object)
                          if e.strip() and normalize_entity(e) not in selves and "," not in e)
    entities = ", ".join(list(names)[:12])
    block = ([heading] + ([f"Topics: {topics}"] if topics else []) + ([f"Entities: {entities}"] if entities else [])
             + ["", *(f"- {line}" for line in fresh)])
    head = current.rstrip() if current.strip() else f"# Memories {run.day}"
    store.write(rel, head + "\n\n" + "\n".join(block) + "\n", source=SOURCE, message_id=prov.source_ref,
                trust=prov.trust)
    return len(fresh), quarantined


def insert_facts(kg: KnowledgeGraph, store: MemoryStore, scope: NightScope, ex: Extraction, ref: str,
                 prov: Provenance) -> tuple[dict[str, int], int]:  # fmt: skip
    counts: dict[str, int] = {}
    flagged: list[Quarantined] = []
    selves = {normalize_entity(n) for n in (*_SELF, *scope.self_names) if n}
    for f in ex.facts:
        text = f"{f.subject} {f.predicate} {f.object}"
        hit = screen_text(text)
        if hit is not None:
            rule, _, reason = hit.partition(" ")
            flagged.append(Quarantined(line=MemoryLine(text=text, provenance=prov), rule=rule, reason=reason))
            continue
        subject = scope.self_id if scope.self_id and normalize_entity(f.subject) in selves else f.subject
        try:
            res = kg.add(scope.kg_scope, subject, f.predicate, f.object, valid_from=f.valid_from,
                         valid_until=f.valid_until, confidence=f.confidence, source_type=SOURCE, source_ref=ref)
        except ValueError as exc:
            counts["rejected"] = counts.get("rejected", 0) + 1
            log.warning("sleep cycle %s: fact %r rejected: %s", scope.key, text[:80], exc)
            continue
        counts[res.status] = counts.get(res.status, 0) + 1
    record(store, flagged)
    return counts, len(flagged)


def _rails(cfg: RailsConfig) -> Rails:
    return Rails(max_ops=cfg.max_ops, max_remove_fraction=cfg.max_remove_fraction,
                 allowed_sections=tuple(cfg.allowed_sections), allow_new_sections=cfg.allow_new_sections)  # fmt: skip


def parse_curation(text: str) -> tuple[Any, Any, list[str]]:
    """(USER.md ops, PATTERNS.md ops, errors); a bare list is USER.md ops, no patterns."""
    errors: list[str] = []
    data = load_json(text, "OPS", errors)
    if isinstance(data, dict):
        return data.get("ops", []), data.get("patterns", []), errors
    return data, [], errors


def _ran(store: MemoryStore, rel: str, run_id: str) -> bool:
    return any(r.get("type") == "run" and r.get("run_id") == run_id for r in curation_audit.read_records(store, rel))


async def curate_profile(
    *, store: MemoryStore, kg: KnowledgeGraph, scope: NightScope, run: SleepRun, ex: Extraction, provider: Any,
    cfg: SleepConfig, rails: RailsConfig,
) -> str:  # fmt: skip
    """One curation run for the night; returns a one-line outcome. Never raises on model trouble."""
    return await curate_learned(store=store, kg=kg, kg_scope=scope.kg_scope, key=scope.key, run_id=f"sleep-{run.slot}",
                                day=date.fromisoformat(run.day), learned=list(ex.memories), provider=provider,
                                cfg=cfg, rails=rails)  # fmt: skip


async def curate_learned(
    *, store: MemoryStore, kg: KnowledgeGraph, kg_scope: str, key: str, run_id: str, day: date, learned: list[str],
    provider: Any, cfg: SleepConfig, rails: RailsConfig,
) -> str:  # fmt: skip
    """One curation run of USER.md and PATTERNS.md from ``learned`` (the night's memories, or the
    summary of a compacted span), under the rails, screened and audited as ``run_id``; a run id
    already in USER.md's audit is not run again. Returns a one-line outcome; never raises on model
    trouble (the caller's work stands)."""
    # One curation of a profile at a time (a night and a compaction, or two compactions, may meet):
    # each reads the file, asks the model and applies ops to what it read.
    async with _CURATING.setdefault(str(store.root), asyncio.Lock()):
        return await _curate_learned(store=store, kg=kg, kg_scope=kg_scope, key=key, run_id=run_id, day=day,
                                     learned=learned, provider=provider, cfg=cfg, rails=rails)  # fmt: skip


_CURATING: dict[str, asyncio.Lock] = {}


async def _curate_learned(
    *, store: MemoryStore, kg: KnowledgeGraph, kg_scope: str, key: str, run_id: str, day: date, learned: list[str],
    provider: Any, cfg: SleepConfig, rails: RailsConfig,
) -> str:  # fmt: skip
    # USER.md's run record marks the curation done; PATTERNS.md is curated just before it.
    if await asyncio.to_thread(_ran, store, "USER.md", run_id):
        return "already curated"
    profile = await asyncio.to_thread(_read, store, "USER.md")
    patterns = await asyncio.to_thread(_read, store, PATTERNS)
    facts = kg.current(kg_scope)[:60]
    recent = await asyncio.to_thread(dated.recent_text, store, day, days=CURATION_DATED_DAYS,
                                     max_chars=CURATION_DATED_CHARS)
    prompt = (
        f"CURRENT USER.md:\n{profile or '(empty)'}\n\nCURRENT PATTERNS.md:\n{patterns or '(empty)'}\n\n"
        f"DATED MEMORIES OF THE LAST {CURATION_DATED_DAYS} DAYS (memories/, newest first):\n{recent or '(none)'}\n\n"
        "LEARNED RECENTLY:\n"
        + "\n".join(f"- {m}" for m in learned)
        + "\n\nKNOWN FACTS:\n"
        + "\n".join(f"- {f.subject} {f.predicate} {f.object}" for f in facts)
    )
    try:
        system = CURATE_SYSTEM.replace("{pattern_sections}", ", ".join(PATTERN_SECTIONS))
        response = await ask(provider, source="curation", system=system, prompt=prompt,
                             role=cfg.curation_backend, max_tokens=cfg.max_tokens, schema=schemas.CURATION)  # fmt: skip
    except Exception as exc:  # the memories stand; the next night curates again
        log.warning("curation %s of %s skipped, model call failed: %s", run_id, key, exc)
        return f"skipped: {exc}"[:200]
    ops, pattern_ops, errors = parse_curation(response.text)
    if ops is None:
        log.warning("curation %s of %s: output unusable: %s", run_id, key, "; ".join(errors))
        return "skipped: unusable output"
    outcome = ""
    if pattern_ops and not await asyncio.to_thread(_ran, store, PATTERNS, run_id):
        # The same rails, screen, audit and rollback as USER.md; only its own sections.
        prails = replace(_rails(rails), allowed_sections=PATTERN_SECTIONS)
        presult = await asyncio.to_thread(
            curate, store, pattern_ops, rel=PATTERNS, rails=prails, screen=screen_text, run_id=run_id,
            source="curation",
        )
        await _quarantine_rejected(store, run_id, presult)
        outcome = f"; patterns: {len(presult.applied)} applied, {len(presult.rejected)} rejected"
    result = await asyncio.to_thread(
        curate, store, ops, rails=_rails(rails), screen=screen_text, run_id=run_id, source="curation"
    )
    await _quarantine_rejected(store, run_id, result)
    for r in result.rejected:
        log.info("curation %s of %s: op %d rejected: %s", run_id, key, r.index, r.reason)
    return (f"run {run_id}: {len(result.applied)} applied, {len(result.rejected)} rejected, written={result.written}"
            + outcome)


async def _quarantine_rejected(store: MemoryStore, run_id: str, result: Any) -> None:
    prov = Provenance(source_type="curation", source_ref=run_id)
    flagged = [
        Quarantined(line=MemoryLine(text=str(r.op.get("text") or r.op.get("new") or r.op.get("section", "")),
                                    provenance=prov), rule="curation", reason=r.reason)
        for r in result.rejected if r.reason.startswith("quarantined") and isinstance(r.op, dict)
    ]  # fmt: skip
    await asyncio.to_thread(record, store, flagged)


async def run_night(
    *,
    state: State,
    kg: KnowledgeGraph,
    store: MemoryStore,
    provider: Any,
    scope: NightScope,
    slot: str,
    before: datetime,
    tz: tzinfo,
    cfg: SleepConfig,
    rails: RailsConfig,
    curation_provider: Any = None,
) -> NightResult:
    """Run (or resume) the night ``slot`` of ``scope``. Raises LLMError / ExtractionError to retry."""
    run = state.sleep_runs.get(scope.key, slot)
    if run is not None and run.stage == "done":
        return NightResult(status="already_done", scope=scope.key, slot=slot, day=run.day, turns=run.turns)
    if run is None:
        run = await _extract(state, scope, slot, before, tz, store, provider, cfg)
        if run is None:
            state.sleep_runs.mark_empty_night(scope.key, slot)
            return NightResult(status="nothing_to_do", scope=scope.key, slot=slot,
                               day=local_today(before, tz).isoformat())  # fmt: skip
    ex = parse_extraction(run.output)
    ref = f"sleep:{scope.key}:{slot}"
    prov = Provenance(source_type=SOURCE, source_ref=ref, trust="untrusted")
    written = quarantined = 0
    facts: dict[str, int] = {}
    if run.stage == "extracted":
        written, quarantined = await asyncio.to_thread(write_memories, store, run, ex, prov)
        facts, q2 = await asyncio.to_thread(insert_facts, kg, store, scope, ex, ref, prov)
        quarantined += q2
        state.sleep_runs.set_stage(scope.key, slot, "applied", run.detail)
    curation = ""
    if scope.curate and cfg.curate:
        curation = await curate_profile(store=store, kg=kg, scope=scope, run=run, ex=ex,
                                        provider=curation_provider or provider, cfg=cfg, rails=rails)  # fmt: skip
    state.sleep_runs.finish_night(scope.key, slot, run.upto_seq, json.dumps({"curation": curation})[:500])
    log.info("sleep cycle %s %s: %d turns, %d memories, facts %s, %d quarantined; %s", scope.key, slot, run.turns,
             written, facts, quarantined, curation or "no curation")  # fmt: skip
    return NightResult(status="done", scope=scope.key, slot=slot, day=run.day, turns=run.turns, memories=written,
                       facts=facts, quarantined=quarantined, curation=curation, errors=ex.errors)  # fmt: skip
