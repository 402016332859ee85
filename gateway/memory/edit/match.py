"""Finding what ``/forget TEXT`` means: the lines of a person's files and the facts it matches.

Two kinds of match, because people rarely quote their memories word for word:

* **literal**: the text (case, spacing and Unicode width folded) occurs in the line or in the fact's
  "subject predicate object" sentence;
* **semantic**: a line of a file that recall returns for the text, whose own embedding is close to the
  text's (cosine >= ``SEMANTIC_MIN``), and facts whose object or subject is named in the text. These are
  guesses, so a plan holding any of them is shown to the person before anything is removed.

Only lines that hold what someone said or wrote are candidates: headings of session logs, their
turn markers and speaker lines are structure (the turn index is rebuilt from them), never content.
``lines_of_ref`` resolves what a recall hit (its chunk id) or ``<path>:<line>`` stands for.
Everything here reads; ``gateway.memory.edit.forget`` applies a plan.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.kinds import indexable
from gateway.memory.files.store import MemoryStore
from gateway.memory.search.chunk import chunk_file
from gateway.state import Fact

MatchKind = Literal["literal", "semantic"]

SEMANTIC_MIN = 0.38  # MiniLM cosine of a line to the text: paraphrases ~0.4-0.85, unrelated lines < 0.3 (measured)
SEMANTIC_HITS = 12  # recall hits whose lines are compared with the text
MIN_WORDS_SEMANTIC = 3  # "- ok" is close to many things and worth nothing
SESSION_PLACEHOLDER = "> [forgotten]"
_QUOTE = re.compile(r"^>\s?")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SKIP_DIRS = ("_history/",)  # curation backups: never recalled, so no semantic candidates there
RECORD_PLACEHOLDER = "[forgotten]"


def fold(text: str) -> str:
    """What two texts are compared as: NFKC, case-folded, whitespace collapsed, no final full stop."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).rstrip(".!? ")


_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`|~~)")


def plain(text: str) -> str:
    """Markdown as read: ``**Anna** likes [tea](x)`` -> ``Anna likes tea`` (a person quotes the words)."""
    return _EMPHASIS.sub("", _LINK.sub(r"\1", text))


def holds(body: str, needle: str) -> bool:
    return needle in fold(body) or needle in fold(plain(body))


@dataclass(frozen=True, slots=True)
class LineMatch:
    path: str
    line_no: int  # 1-based, in the file as it was read
    text: str  # the exact line, without its line break
    match: MatchKind
    score: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line_no, "text": self.text, "match": self.match,
                "score": round(self.score, 3)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class FactMatch:
    fact: Fact
    match: MatchKind

    def to_dict(self) -> dict[str, Any]:
        f = self.fact
        return {"id": f.id, "subject": f.subject, "predicate": f.predicate, "object": f.object, "match": self.match}


def candidate_files(store: MemoryStore) -> list[str]:
    """The person's files a forget looks at: everything indexed (Markdown and text), and the files that
    keep copies of their lines for review or rollback, which ``memory_get`` could still read: JSON-lines
    records (``QUARANTINE.jsonl``, the curation audits ``USER.md.audit.jsonl``...) and the curation
    backups ``_history/*.bak`` (a rollback to a backup that still held the line would restore it)."""
    return [e.path for e in store.files()
            if indexable(e.path) or is_record_file(e.path) or (e.path.startswith("_history/")
                                                              and e.path.endswith(".bak"))]  # fmt: skip


def is_record_file(path: str) -> bool:
    return path.endswith(".jsonl")


def scrub_record(line: str, needle: str) -> str:
    """A JSON-lines record with every string that holds ``needle`` replaced ("" when the line is not
    JSON: then it goes whole)."""
    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return RECORD_PLACEHOLDER if needle in fold(value) else value
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        return value

    try:
        return json.dumps(scrub(json.loads(line)), ensure_ascii=False, sort_keys=True)
    except ValueError:
        return ""


def content_of(path: str, line: str) -> str | None:
    """The removable content of a line, or None for structure (blank lines, log markers and headings)."""
    stripped = line.strip()
    if is_record_file(path):
        return stripped or None  # one record per line: matched as a whole, scrubbed field by field
    if not stripped or stripped.startswith("<!--"):
        return None
    if path.startswith("sessions/"):
        # A session log's structure is parsed back into turns: only quoted message lines are content.
        if not stripped.startswith(">") or stripped == SESSION_PLACEHOLDER:
            return None
        return _QUOTE.sub("", stripped)
    return _BULLET.sub("", stripped.lstrip("#").strip()) or None


def literal_lines(store: MemoryStore, needle: str) -> list[LineMatch]:
    out: list[LineMatch] = []
    for path in candidate_files(store):
        try:
            text = store.read(path)
        except MemoryStoreError:
            continue  # changed under us: the next forget sees it
        for no, line in enumerate(text.splitlines(), 1):
            body = content_of(path, line)
            if body is not None and holds(body, needle):
                out.append(LineMatch(path, no, line, "literal"))
    return out


def semantic_candidates(store: MemoryStore, hits: list[Any], taken: set[tuple[str, int]]) -> list[LineMatch]:
    """Lines of the files recall found that are part of a hit's text (not yet matched literally)."""
    out: list[LineMatch] = []
    texts: dict[str, list[str]] = {}
    for hit in hits:
        texts.setdefault(hit.source, []).append(fold(hit.text))
    for path, hit_texts in texts.items():
        if not indexable(path) or path.startswith(_SKIP_DIRS):
            continue
        try:
            lines = store.read(path).splitlines()
        except MemoryStoreError:
            continue
        for no, line in enumerate(lines, 1):
            body = content_of(path, line)
            if body is None or (path, no) in taken or len(body.split()) < MIN_WORDS_SEMANTIC:
                continue
            folded = fold(body)
            if any(folded in t for t in hit_texts):
                out.append(LineMatch(path, no, line, "semantic"))
    return out


def close_lines(embedder: Any, text: str, candidates: list[LineMatch]) -> list[LineMatch]:
    """The candidates whose embedding is within ``SEMANTIC_MIN`` cosine of ``text`` (blocking)."""
    if not candidates:
        return []
    import numpy as np  # here, not at import: the tool that imports this loads at every start

    bodies = [content_of(c.path, c.text) or "" for c in candidates]
    vectors = np.asarray(embedder.embed_documents([text, *bodies]), dtype=np.float32)
    scores = vectors[1:] @ vectors[0]  # vectors are L2-normalised: the dot product is the cosine
    return [LineMatch(c.path, c.line_no, c.text, "semantic", float(s))
            for c, s in zip(candidates, scores, strict=True) if s >= SEMANTIC_MIN]  # fmt: skip


def _phrase_in(phrase: str, text: str) -> bool:
    return len(phrase) >= 3 and re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def matching_facts(facts: list[Fact], needle: str, *, self_ids: tuple[str, ...]) -> list[FactMatch]:
    """Facts stating the text (literal), or naming in the text what they are about (semantic)."""
    selves = {fold(s) for s in self_ids if s}
    out: list[FactMatch] = []
    for f in facts:
        sentence = fold(f"{f.subject} {f.predicate.replace('_', ' ')} {f.object}")
        if needle in sentence:
            out.append(FactMatch(f, "literal"))
        elif _phrase_in(fold(f.object), needle) or (fold(f.subject) not in selves and _phrase_in(fold(f.subject),
                                                                                                   needle)):
            out.append(FactMatch(f, "semantic"))
    return out


def lines_of_ref(store: MemoryStore, ref: str) -> list[LineMatch]:
    """The lines a recall hit (``f:<path>#<n>``, ``t:<turn id>``) or ``<path>:<line>`` stands for."""
    try:
        if ref.startswith("t:"):
            return _turn_lines(store, ref[2:])
        if ref.startswith("f:") and "#" in ref:
            path = ref[2:].rpartition("#")[0]
            chunk = next((c for c in chunk_file(path, store.read(path)) if c.chunk_id == ref), None)
            if chunk is None:
                return []
            inside = fold(chunk.text)
            return [LineMatch(path, no, line, "literal") for no, line in enumerate(store.read(path).splitlines(), 1)
                    if (body := content_of(path, line)) is not None and fold(body) in inside]  # fmt: skip
        path, _, no = ref.rpartition(":")
        if path and no.isdigit():
            lines = store.read(path).splitlines()
            n = int(no)
            if 1 <= n <= len(lines) and content_of(path, lines[n - 1]) is not None:
                return [LineMatch(path, n, lines[n - 1], "literal")]
    except MemoryStoreError:
        return []
    return []


def _turn_lines(store: MemoryStore, turn_id: str) -> list[LineMatch]:
    marker = f"id={turn_id} "
    for entry in store.files("sessions"):
        lines = store.read(entry.path).splitlines()
        for i, line in enumerate(lines):
            if line.startswith("<!-- kith:turn") and marker in line:
                out = []
                for j in range(i + 1, len(lines)):
                    if lines[j].startswith("<!-- kith:turn"):
                        break
                    if content_of(entry.path, lines[j]) is not None:
                        out.append(LineMatch(entry.path, j + 1, lines[j], "literal"))
                return out
    return []
