"""The review queue for memory lines the poisoning guard held back: ``QUARANTINE.jsonl`` in the root.

Lines are never lost: what the guard flags is kept here with its provenance for an operator to
review, and never enters a file that is loaded into prompts. Appends are idempotent per
(text, source_ref), so a job retried after a crash does not queue the same line twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from gateway.memory.files.poison import MemoryLine, Provenance, Quarantined, quarantine_record, screen
from gateway.memory.files.store import MemoryStore
from gateway.util.jsonl import json_objects

log = logging.getLogger("kith.memory.quarantine")
REL = "QUARANTINE.jsonl"


def _existing(store: MemoryStore) -> set[tuple[str, str]]:
    records = json_objects(store.read(REL)) if store.exists(REL) else ()
    return {(str(rec.get("text", "")), str(rec.get("source_ref", ""))) for rec in records}


def record(store: MemoryStore, items: Iterable[Quarantined]) -> int:
    """Append quarantined lines not queued before; returns how many were added."""
    items = list(items)
    if not items:
        return 0
    seen = _existing(store)
    now = datetime.now(UTC).isoformat()
    fresh = [q for q in items if (q.line.text, q.line.provenance.source_ref) not in seen]
    if fresh:
        text = "".join(json.dumps(quarantine_record(q, ts=now), ensure_ascii=False) + "\n" for q in fresh)
        store.append(REL, text, source="guard")
        for q in fresh:
            log.warning("quarantined a memory line (%s) from %s", q.rule, q.line.provenance.source_ref)
    return len(fresh)


def filter_lines(store: MemoryStore, lines: Iterable[str], provenance: Provenance) -> list[str]:
    """The lines the guard accepts; the others go to the review queue."""
    result = screen(MemoryLine(text=t, provenance=provenance) for t in lines)
    record(store, result.quarantined)
    return [m.text for m in result.accepted]


def filter_text(store: MemoryStore, text: str, provenance: Provenance) -> str:
    """A Markdown body with flagged lines removed (and queued). Headings and blank lines pass."""
    out = []
    flagged = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            res = screen([MemoryLine(text=line.strip(), provenance=provenance)])
            if res.quarantined:
                flagged.extend(res.quarantined)
                continue
        out.append(line)
    record(store, flagged)
    return "\n".join(out)
