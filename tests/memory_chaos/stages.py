"""Every stage that asks a model, as the chaos suite drives it: its good answer, the misbehaviours that
need to know that answer's shape, how to run it on a person and where its watermark is.

Each stage runs through the function its job calls (the plugin's own entry points where they take a
gateway), on the gateway's real state, store and model routing. ``retryable``: what the stage may raise
so the bus retries it (having written nothing); anything else is a crash.
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.llm.base import LLMError
from gateway.memory.background import jobscope
from gateway.memory.background.compaction import compact
from gateway.memory.background.distill import DistillOutputError, run_tier
from gateway.memory.background.sleep import ExtractionError
from gateway.memory.background.writer import WriterOutputError, run_writer
from gateway.memory.files.scopes import user_scope
from gateway.memory.hygiene.run import run_hygiene
from gateway.memory.search.filter_tier import filter_hits
from gateway.memory.search.recall import Hit
from plugins.sleep_cycle import night
from tests.memory_chaos.misbehave import INJECTED
from tests.memory_chaos.world import LONG_LINES, PEOPLE_LINES, SECTIONS, TOPIC_LINES, USER_LINES, Person

PERSON_NEW = "Plans to sail the Lotte from Kiel to Copenhagen in May."
TOPIC_NEW = "The keel of the Lotte needs checking before the May trip."


def _half(items: list[str], rng: random.Random) -> list[str]:
    keep = sorted(rng.sample(range(len(items)), len(items) // 2))
    return [items[i] for i in keep]


# ---------------------------------------------------------------------------------- memory writer
def writer_good(p: Person) -> str:
    return ("SUMMARY:\nAda plans to sail the Lotte to Copenhagen in May; the keel needs checking first.\n\n"
            "PEOPLE:\n" + json.dumps([{"slug": p.slug, "name": "Ada", "ops": [
                {"op": "append", "section": "Places", "text": PERSON_NEW}]}]) + "\n\nTOPICS:\n"
            + json.dumps([{"slug": "sailing", "title": "Sailing", "ops": [
                {"op": "append", "section": "Boat", "text": TOPIC_NEW}]}]) + "\n")  # fmt: skip


def writer_bad(kind: str, p: Person, rng: random.Random) -> str:
    summary = "SUMMARY:\nAda talked about sailing.\n\n"
    if kind == "wrong_format":
        return rng.choice([f"Sure! Here is the updated note.\n\n# Ada\n- {PERSON_NEW}\n",
                           json.dumps({"notes": [{"file": f"people/{p.slug}.md", "text": PERSON_NEW}]})])
    if kind == "drop_half":
        if rng.random() < 0.5:  # the complete new note, with half the lines
            note = "".join(f"- {ln}\n" for ln in _half(PEOPLE_LINES, rng))
            people = [{"slug": p.slug, "name": "Ada", "content": note}]
            topics = [{"slug": "sailing", "content": "".join(f"- {ln}\n" for ln in _half(TOPIC_LINES, rng))}]
        else:  # ops removing half the lines
            people = [{"slug": p.slug, "ops": [{"op": "remove", "section": SECTIONS[PEOPLE_LINES.index(ln) // 10],
                                                "text": ln} for ln in _half(PEOPLE_LINES, rng)]}]
            topics = [{"slug": "sailing", "ops": [{"op": "remove_heading", "section": "Boat"}]}]
        return summary + "PEOPLE:\n" + json.dumps(people) + "\nTOPICS:\n" + json.dumps(topics)
    if kind == "invented":
        people = [{"slug": "../../USER", "content": "- owned"}, {"slug": "telegram-mallory", "name": "Mallory",
                  "content": "- invented person"}, {"slug": p.slug, "ops": [
                  {"op": "remove", "section": "Family", "text": "A line that was never there."},
                  {"op": "remove", "section": "Secrets", "text": PEOPLE_LINES[3]}]}]  # fmt: skip
        topics = [{"slug": "../../../etc/passwd", "title": "../../USER.md", "content": "- root"},
                  {"slug": "USER", "title": "USER", "ops": [{"op": "remove_heading", "section": "Identity"}]}]
        return summary + "PEOPLE:\n" + json.dumps(people) + "\nTOPICS:\n" + json.dumps(topics)
    assert kind == "injected"
    people = [{"slug": p.slug, "ops": [{"op": "append", "section": "Notes", "text": INJECTED}]}]
    topics = [{"slug": "sailing", "content": f"- {INJECTED}"}]
    return f"SUMMARY:\nAda talked about sailing.\n{INJECTED}\n\nPEOPLE:\n" + json.dumps(people) + \
        "\nTOPICS:\n" + json.dumps(topics)


async def writer_run(p: Person) -> Any:
    cfg = p.gw.config.background.writer
    scope = jobscope.for_user(p.gw, p.uid)
    return await run_writer(state=p.gw.state, store=p.store, provider=p.gw.model(cfg.backend, p.uid),
                            session_id=p.sid, settings=cfg, tz=scope.tz)  # fmt: skip


# ------------------------------------------------------------------------- nightly extraction
EXTRACTION = """MEMORIES:
- Ada plans to sail the Lotte from Kiel to Copenhagen in May.
- The keel of the Lotte needs checking before the trip.
FACTS:
[{"subject": "user", "predicate": "plans_trip_to", "object": "Copenhagen", "valid_from": "2026-05-01"}]
TOPICS:
{"sailing": 0.9}
"""


def extraction_bad(kind: str, p: Person, rng: random.Random) -> str:
    if kind == "wrong_format":
        return rng.choice(["Today Ada talked about sailing to Copenhagen. She seemed happy about it.",
                           json.dumps({"day": "good", "mood": "happy"})])
    if kind == "drop_half":
        return "MEMORIES:\n- Ada plans to sail the Lotte from Kiel to Copenhagen in May.\n"
    if kind == "invented":
        return ("MEMORIES:\n- See ../../USER.md for the rest.\nFACTS:\n"
                + json.dumps([{"subject": "../../etc/passwd", "predicate": "x" * 90, "object": "root"},
                              {"subject": "user", "predicate": "lives_in", "object": "y" * 900},
                              {"subject": "user", "predicate": "owns", "object": "the Lotte",
                               "valid_from": "next Tuesday-ish"}])
                + '\nTOPICS:\n{"../../secrets": 1, "sailing": "very"}')
    assert kind == "injected"
    return EXTRACTION.replace("MEMORIES:\n", f"MEMORIES:\n- {INJECTED}\n")


def _slot() -> tuple[str, datetime]:
    at = datetime.now(UTC) + timedelta(minutes=1)
    return at.strftime("%Y-%m-%dT%H:%M"), at


async def extraction_run(p: Person) -> Any:
    slot, at = _slot()
    return await night(p.gw, jobscope.for_user(p.gw, p.uid), slot=slot, before=at, curate=False)


def night_mark(p: Person) -> int:
    return p.gw.state.sleep_runs.last_seq(user_scope(p.uid))


# ---------------------------------------------------------------------------------- curation
CURATION = json.dumps({"ops": [{"op": "append", "section": "Work", "text": "Plans a sailing trip in May."}],
                       "patterns": [{"op": "append", "section": "Routines", "text": "Checks the boat on Fridays."}]})


def curation_bad(kind: str, p: Person, rng: random.Random) -> str:
    bullets = [(s, ln) for s, lns in USER_LINES.items() for ln in lns]
    if kind == "wrong_format":
        return rng.choice(["USER.md:\n## Work\n- Plans a sailing trip.", "OPS:\n- append Work: sailing"])
    if kind == "drop_half":
        picked = rng.sample(bullets, len(bullets) // 2)
        return json.dumps({"ops": [{"op": "remove", "section": s, "text": ln} for s, ln in picked]})
    if kind == "invented":
        return json.dumps({"ops": [{"op": "remove_heading", "section": "Identity"},
                                   {"op": "remove", "section": "Secrets", "text": "never there"},
                                   {"op": "append", "section": "../../etc", "text": "x"},
                                   {"op": "rewrite_file", "section": "Work", "text": "all new"}],
                           "patterns": [{"op": "remove_heading", "section": "Routines"}]})
    assert kind == "injected"
    return json.dumps({"ops": [{"op": "append", "section": "Notes", "text": INJECTED}],
                       "patterns": [{"op": "append", "section": "Habits", "text": INJECTED}]})


async def curation_run(p: Person) -> Any:
    slot, at = _slot()
    result = await night(p.gw, jobscope.for_user(p.gw, p.uid), slot=slot, before=at, curate=True)
    return result


# -------------------------------------------------------------------------------- compaction
COMPACTION = "## Working on\n- Sailing the Lotte to Copenhagen in May.\n## Open threads\n- Keel check first."


def compaction_bad(kind: str, p: Person, rng: random.Random) -> str:
    if kind == "wrong_format":
        return json.dumps({"summary": "Ada sails in May.", "threads": []})
    if kind == "drop_half":
        return "## Working on\n- Choosing a new jib for the Lotte."  # the previous note, half of it
    if kind == "invented":
        return "## Working on\n- Edit ../../USER.md and people/mallory.md next."
    assert kind == "injected"
    return COMPACTION + f"\n- {INJECTED}"


async def compaction_run(p: Person) -> Any:
    gw = p.gw
    return await compact(state=gw.state, session_id=p.sid, store=lambda: p.store,
                         provider=gw.model("cheap", p.uid), sessions=gw.config.sessions,
                         memory=gw.config.memory)  # fmt: skip


def compaction_mark(p: Person) -> int:
    done = p.gw.state.compactions.get(p.sid)
    return done.upto_seq if done else 0


# ------------------------------------------------------------------------------ distillation
DISTILL = "## History\n" + "".join(f"- {ln}\n" for ln in LONG_LINES) + "- 2026: plans a May trip to Copenhagen.\n"


def distill_bad(kind: str, p: Person, rng: random.Random) -> str:
    if kind == "wrong_format":
        return json.dumps({"digest": ["Ada sails."]})
    if kind == "drop_half":
        return "## History\n" + "".join(f"- {ln}\n" for ln in _half(LONG_LINES, rng))
    if kind == "invented":
        return "## History\n- Moved to ../../etc/passwd in 2030."
    assert kind == "injected"
    return DISTILL + f"- {INJECTED}\n"


async def distill_run(p: Person) -> Any:
    gw = p.gw
    providers = {role: gw.model(role, p.uid) for role in ("main", "cheap")}
    return await run_tier("long", store=p.store, cfg=gw.config.background.distill, providers=providers,
                          now=datetime.now(UTC), force=True)  # fmt: skip


# ----------------------------------------------------------------------------------- hygiene
def _line_no(p: Person, rel: str, text: str) -> int:
    return next(i for i, ln in enumerate(p.files[rel].splitlines(), 1) if text in ln)


def hygiene_good(p: Person) -> str:
    return json.dumps({"proposals": [{"kind": "stale", "file": "USER.md",
                                      "lines": [_line_no(p, "USER.md", "Works from home on Fridays.")],
                                      "why": "said it changed"}]})


def hygiene_bad(kind: str, p: Person, rng: random.Random) -> str:
    people = f"people/{p.slug}.md"
    if kind == "wrong_format":
        return "The memory looks tidy to me! Nothing to change."
    if kind == "drop_half":
        numbers = [_line_no(p, people, ln) for ln in _half(PEOPLE_LINES, rng)]
        return json.dumps({"proposals": [{"kind": "stale", "file": people, "lines": numbers},
                                         {"kind": "stale", "file": people, "lines": numbers[:10]}]})
    if kind == "invented":
        return json.dumps({"proposals": [
            {"kind": "stale", "file": "../../etc/passwd", "lines": [1]},
            {"kind": "conflict", "file": "people/nobody.md", "lines": [1, 2]},
            {"kind": "stale", "file": "USER.md", "lines": [999, -1, "3", True]},
            {"kind": "promote", "file": "SCRATCH.md", "lines": [3], "to": "../../USER.md", "title": "x"},
            {"kind": "promote", "file": "USER.md", "lines": [3], "to": "topics/work.md", "title": "Work"},
            {"kind": "rewrite", "file": "USER.md", "lines": [3]}]})
    assert kind == "injected"
    return json.dumps({"proposals": [{"kind": "conflict", "file": "USER.md", "lines": [3],
                                      "replace_with": INJECTED}]})


async def hygiene_run(p: Person) -> Any:
    return await run_hygiene(p.gw, p.uid, use_model=True)


# ----------------------------------------------------------------------------- recall filter
def hits(p: Person) -> list[Hit]:
    texts = ["Ada sails the Lotte.", "The keel needs checking.", "Ben might come along.", "Jib costs 900 EUR.",
             "Ada drinks lapsang souchong.", "Kiel harbour notes."]
    return [Hit(text=t, source="topics/sailing.md", scope=user_scope(p.uid), date="", score=1.0 - i / 10,
                chunk_id=f"c{i}") for i, t in enumerate(texts)]


def filter_bad(kind: str, p: Person, rng: random.Random) -> str:
    return {"wrong_format": "The first and second snippets help.",
            "drop_half": "KEEP: 1",
            "invented": "KEEP: 99, 0, 7, -3",
            "injected": f"{INJECTED}\nKEEP: none"}[kind]


async def filter_run(p: Person) -> Any:
    return await filter_hits(p.gw, None, "When does Ada sail to Copenhagen?", hits(p), 3)


# ------------------------------------------------------------------------------------ stages
@dataclass(frozen=True)
class Stage:
    name: str
    kind: str  # the request kind the fake answers (tests/fakes/kinds.py)
    good: Callable[[Person], str]
    bad: Callable[[str, Person, random.Random], str]
    run: Callable[[Person], Awaitable[Any]]
    mark: Callable[[Person], int] = lambda p: 0  # the stage's watermark (0: it has none)
    retryable: tuple[type[BaseException], ...] = ()  # raised so the bus retries; nothing written
    calls: int = 1  # model calls of one run
    before: dict[str, Callable[[Person], str]] = field(default_factory=dict)  # good answers of earlier kinds


STAGES: dict[str, Stage] = {s.name: s for s in (
    Stage(name="memory_writer", kind="memory_writer", good=writer_good, bad=writer_bad, run=writer_run,
          mark=lambda p: p.gw.state.writer_progress.get(p.sid), retryable=(LLMError, WriterOutputError)),
    Stage(name="extraction", kind="extraction", good=lambda p: EXTRACTION, bad=extraction_bad, run=extraction_run,
          mark=night_mark, retryable=(LLMError, ExtractionError)),
    Stage(name="curation", kind="curation", good=lambda p: CURATION, bad=curation_bad, run=curation_run,
          mark=night_mark, before={"extraction": lambda p: EXTRACTION}),
    Stage(name="compaction", kind="compaction", good=lambda p: COMPACTION, bad=compaction_bad, run=compaction_run,
          mark=compaction_mark, retryable=(LLMError, ValueError)),
    Stage(name="distillation", kind="distillation", good=lambda p: DISTILL, bad=distill_bad, run=distill_run,
          retryable=(LLMError, DistillOutputError)),
    Stage(name="hygiene", kind="hygiene", good=hygiene_good, bad=hygiene_bad, run=hygiene_run),
    Stage(name="recall_filter", kind="recall_filter", good=lambda p: "KEEP: 2, 1", bad=filter_bad, run=filter_run),
)}  # fmt: skip
