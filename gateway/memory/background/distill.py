"""Distillation tiers: MEMORY_SHORT.md (daily, no model), MEMORY_MID.md (weekly), MEMORY_LONG.md (monthly).

* **short**: the most recent days of ``sessions/`` that fit the token budget, oldest first. A day is
  represented by the memory writer's summaries (``sessions/<date>-<slot>.md``) when it has them and by
  the raw session log (``sessions/<date>.md``) otherwise; a day too large for what is left of the
  budget keeps its end (the latest turns). Pure aggregation: fast, free, deterministic.
* **mid**: the model condenses MEMORY_SHORT into themes, decisions, projects, current state.
* **long**: the model integrates MEMORY_MID into MEMORY_LONG (keep history, update what changed,
  drop what no longer matters). Off by default: its first runs deserve a human look.

Model output is untrusted: lines the poisoning guard flags go to ``QUARANTINE.jsonl``, and an empty
or oversize answer (over 4x the tier's budget) is refused, leaving the previous file in place.
Files are rewritten only when their content changed. A model tier's rewrite keeps the file it replaces
(a pre-run copy and a run record in ``<file>.audit.jsonl``), so what the model dropped can be restored
(``kith memory rollback --file MEMORY_LONG.md``). Tokens are estimated as characters / 4.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from gateway.memory.background.ask import ask
from gateway.memory.background.settings import DistillConfig
from gateway.memory.background.writer import TRUNCATED
from gateway.memory.background.writer_ops import audited_write
from gateway.memory.files.poison import Provenance
from gateway.memory.files.quarantine import filter_text
from gateway.memory.files.store import MemoryStore

log = logging.getLogger("kith.memory.distill")
Tier = Literal["short", "mid", "long"]
TIERS: tuple[Tier, ...] = ("short", "mid", "long")
FILES: dict[str, str] = {"short": "MEMORY_SHORT.md", "mid": "MEMORY_MID.md", "long": "MEMORY_LONG.md"}
CHARS_PER_TOKEN = 4
# <date>.md is the raw log (continued in <date>.2.md, .3.md ... past the file cap); <date>-<slot>.md
# are the memory writer's summaries.
_DAY = re.compile(r"^sessions/(\d{4}-\d{2}-\d{2})(?:-([a-z]+)|\.(\d+))?\.md$")
_SLOTS = {"night": 0, "morning": 1, "afternoon": 2, "evening": 3}

MID_SYSTEM = """You distill an assistant's recent memory into a concise digest, written in the first \
person as the assistant. Cover recurring themes, decisions, ongoing projects, and the person's \
current state and priorities. Markdown bullets under a few short headings. At most {budget} tokens. \
Facts only; no instructions."""

LONG_SYSTEM = """You maintain an assistant's long-term memory. Integrate the new digest into the \
existing long-term memory: keep historical facts, update what changed, absorb new themes, remove \
what no longer matters. Markdown, at most {budget} tokens. Facts only; no instructions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DistillResult:
    tier: Tier
    status: Literal["written", "unchanged", "skipped", "disabled"]
    file: str
    chars: int = 0
    detail: str = ""


class DistillOutputError(Exception):
    """The model's digest is empty or oversize; the tier file was left as it was."""


def _days(store: MemoryStore) -> dict[str, list[str]]:
    """date -> its session files, summaries first (in slot order), else the raw log."""
    found: dict[str, dict[str, list[str]]] = {}
    for e in store.files("sessions"):
        m = _DAY.match(e.path)
        if m is None:
            continue
        kind = "summaries" if m.group(2) else "raw"
        found.setdefault(m.group(1), {"summaries": [], "raw": []})[kind].append(e.path)
    out = {}
    for day, kinds in found.items():
        summaries = sorted(kinds["summaries"], key=lambda p: _SLOTS.get(_DAY.match(p).group(2), 9))  # type: ignore[union-attr]
        raw = sorted(kinds["raw"], key=lambda p: int(_DAY.match(p).group(3) or 1))  # type: ignore[union-attr]
        out[day] = summaries or raw
    return out


def short_digest(store: MemoryStore, *, budget_tokens: int, now: datetime) -> str:
    budget = budget_tokens * CHARS_PER_TOKEN
    header = f"# Recent sessions\n\n<!-- kith:distill tier=short generated={now:%Y-%m-%d %H:%M} UTC -->\n"
    picked: list[str] = []
    left = budget - len(header)
    for day, files in sorted(_days(store).items(), reverse=True):
        text = "\n\n".join(store.read(f).strip() for f in files)
        block = f"\n## {day}\n\n{_demote(text)}\n"
        if len(block) > left:
            if not picked and left > 200:  # the newest day alone is too big: keep its latest part
                picked.append(f"\n## {day}\n\n[... earlier part of the day omitted ...]\n" + block[-(left - 60):])
            break
        picked.append(block)
        left -= len(block)
    return header + "".join(reversed(picked))


def _demote(text: str) -> str:
    """Headings of the included files move under the day's H2 and provenance comments go."""
    lines = []
    for line in text.splitlines():
        if line.startswith("<!-- kith:"):
            continue
        lines.append("#" * min(line.index(" ") + 2, 6) + line[line.index(" "):] if _is_heading(line) else line)
    return "\n".join(lines).strip()


def _is_heading(line: str) -> bool:
    return line.startswith("#") and " " in line and set(line[: line.index(" ")]) == {"#"}


def _write_if_changed(store: MemoryStore, rel: str, text: str, source: str, *, run_id: str = "") -> bool:
    """``run_id``: a model wrote ``text``, so the file it replaces is kept (a pre-run copy and a run
    record in its audit) and the run can be undone; the no-model short tier is rebuilt from the
    session files, which stay, and needs no copy."""
    if store.exists(rel) and _strip_generated(store.read(rel)) == _strip_generated(text):
        return False
    if run_id:
        return audited_write(store, rel, text, run_id=run_id, source=source, trust="derived")
    store.write(rel, text, source=source)
    return True


def _strip_generated(text: str) -> str:
    return re.sub(r"<!-- kith:distill [^>]*-->", "", text)


async def run_tier(
    tier: Tier,
    *,
    store: MemoryStore,
    cfg: DistillConfig,
    providers: dict[str, Any],
    now: datetime,
    force: bool = False,
) -> DistillResult:
    """Run one tier for one user's store. ``providers`` maps backend role -> provider. Model errors
    (``LLMError``) and ``DistillOutputError`` propagate after leaving the old file untouched."""
    tcfg = getattr(cfg, tier)
    rel = FILES[tier]
    if not tcfg.enabled and not force:
        return DistillResult(tier=tier, status="disabled", file=rel)
    source = f"distill_{tier}"
    if tier == "short":
        text = await asyncio.to_thread(short_digest, store, budget_tokens=tcfg.budget_tokens, now=now)
        changed = await asyncio.to_thread(_write_if_changed, store, rel, text, source)
        return DistillResult(tier=tier, status="written" if changed else "unchanged", file=rel, chars=len(text))
    src_rel = FILES["short"] if tier == "mid" else FILES["mid"]
    source_text = await asyncio.to_thread(lambda: store.read(src_rel) if store.exists(src_rel) else "")
    if not source_text.strip():
        return DistillResult(tier=tier, status="skipped", file=rel, detail=f"{src_rel} is empty")
    if tier == "mid":
        system, prompt = MID_SYSTEM, f"RECENT MEMORY:\n{source_text}"
    else:
        existing = await asyncio.to_thread(lambda: store.read(rel) if store.exists(rel) else "")
        system = LONG_SYSTEM
        prompt = f"EXISTING LONG-TERM MEMORY:\n{existing or '(empty)'}\n\nNEW DIGEST:\n{source_text}"
    response = await ask(providers[tcfg.backend], source=source, system=system.replace("{budget}",
                         str(tcfg.budget_tokens)), prompt=prompt, role=tcfg.backend,
                         max_tokens=min(tcfg.budget_tokens * 2, 64000))  # fmt: skip
    body = response.text.strip()
    limit = tcfg.budget_tokens * CHARS_PER_TOKEN * 4
    if not body or len(body) > limit:
        raise DistillOutputError(f"{tier} digest of {len(body)} characters refused (empty or over {limit})")
    if response.stop_reason in TRUNCATED:
        raise DistillOutputError(f"{tier} digest cut off at the token limit; the old file stays")
    prov = Provenance(source_type=source, source_ref=f"{source}:{now:%Y-%m-%d}", trust="derived")
    body = await asyncio.to_thread(filter_text, store, body, prov)
    title = "Mid-term memory" if tier == "mid" else "Long-term memory"
    text = f"# {title}\n\n<!-- kith:distill tier={tier} generated={now:%Y-%m-%d %H:%M} UTC -->\n\n{body}\n"
    run_id = f"{source}-{now:%Y%m%d%H%M}-{uuid.uuid4().hex[:6]}"
    changed = await asyncio.to_thread(_write_if_changed, store, rel, text, source, run_id=run_id)
    return DistillResult(tier=tier, status="written" if changed else "unchanged", file=rel, chars=len(text))
