"""Split memory files into the units the index stores.

* Short files (<= ``WHOLE_FILE_WORDS``) are one chunk.
* Longer files: one chunk per H2 section with "H1 / H2" prepended, the preamble before the first H2
  its own chunk under the H1; sections longer than ``SECTION_MAX_WORDS`` are cut into overlapping
  windows so a sentence near a cut still appears whole in one of them.
* Session logs (``sessions/*.md``, see ``files.session_log``) become one unit per turn, carrying its date,
  speaker and channel in the indexed text: questions about "when" and "who" match those words.

Word counts stand in for tokens (about 1.3 tokens per English word), which keeps chunking free of the
embedding model's tokenizer and identical across models.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time

from gateway.memory.files.session_log import TurnRecord, parse_session_log
from gateway.memory.search.index import norm_label

WHOLE_FILE_WORDS = 300
SECTION_MAX_WORDS = 900  # ~1200 tokens
WINDOW_WORDS = 600  # ~800 tokens
OVERLAP_WORDS = 150  # ~200 tokens
NEVER = 1e18  # valid_until of chunks that do not expire: a number keeps the filter a plain range

_DATE_IN_PATH = re.compile(r"(\d{4}-\d{2}-\d{2})")
_TOPICS = re.compile(r"^Topics:[ \t]*(.+)$", re.MULTILINE)
_ENTITIES = re.compile(r"^Entities:[ \t]*(.+)$", re.MULTILINE)
_EXPIRES = re.compile(r"^\s*(?:[-*]\s*)?(?:expires|valid[_ ]until)\s*:\s*(\S+)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    chunk_id: str  # stable within a scope: "f:<path>#<n>" or "t:<turn id>"
    path: str  # source file, store-relative
    kind: str  # "file" | "turn"
    text: str  # shown to callers and indexed for BM25: headings / date / speaker included
    context: str = ""  # embedded with ``text`` for the dense vector only (the previous turn)
    ts: float = 0.0  # epoch seconds the chunk is dated at (recency decay); 0 = undated
    turn_ids: tuple[str, ...] = ()
    speaker: str = ""
    channel: str = ""
    session_id: str = ""
    valid_until: float = NEVER
    topic: str = ""  # the dominant topic (payload field, seed 004): first of a "Topics:" line, or topics/<slug>.md
    entities: tuple[str, ...] = ()  # entities it names ("Entities:" lines), normalised (``norm_label``)

    @property
    def dense_text(self) -> str:
        return f"{self.context}\n{self.text}" if self.context else self.text

    @property
    def content_hash(self) -> str:
        """Changes whenever anything that is embedded or filtered on changes."""
        parts: tuple[str, ...] = (self.text, self.context, repr(self.ts), repr(self.valid_until), self.path, self.kind)
        if self.topic or self.entities:  # only then: chunks without labels keep their hash (no re-embedding)
            parts += (self.topic, ",".join(self.entities))
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.ts, UTC).isoformat() if self.ts else ""


def turn_text(rec: TurnRecord) -> str:
    # Weekday and month names are words a question may use ("in May", "on a Sunday").
    return f"[{rec.timestamp:%A %-d %B %Y %H:%M}] {rec.speaker} ({rec.channel}): {rec.text}"


def turn_chunk(rec: TurnRecord, previous: TurnRecord | None = None) -> Chunk:
    """A transcript turn; the previous turn of the same session is context for the dense vector,
    because an answer ("yes, last Sunday") often only makes sense with its question."""
    context = f"{previous.speaker}: {previous.text}" if previous is not None else ""
    return Chunk(
        chunk_id=f"t:{rec.turn_id}",
        path=f"sessions/{rec.timestamp:%Y-%m-%d}.md",
        kind="turn",
        text=turn_text(rec),
        context=context,
        ts=rec.timestamp.timestamp(),
        turn_ids=(rec.turn_id,),
        speaker=rec.speaker,
        channel=rec.channel,
        session_id=rec.session_id,
    )


def turn_chunks(records: list[TurnRecord]) -> list[Chunk]:
    last: dict[str, TurnRecord] = {}
    out = []
    for rec in records:
        out.append(turn_chunk(rec, last.get(rec.session_id)))
        last[rec.session_id] = rec
    return out


def chunk_file(path: str, text: str) -> list[Chunk]:
    """Chunks of one store file (``path`` relative to its root)."""
    if path.startswith("sessions/"):
        turns = parse_session_log(text, _path_day(path))
        if turns:
            # A turn block moved to another file keeps its id but belongs to the file it is in now.
            # A turn logged twice is indexed once, as its first occurrence (every code path agrees).
            unique: dict[str, Chunk] = {}
            for c in turn_chunks(turns):
                unique.setdefault(c.chunk_id, replace(c, path=path))
            return list(unique.values())
    ts = _file_ts(path)
    valid_until = _expiry(text)
    pieces = _split(text)
    file_topic = _topic_of_path(path)
    out = []
    for i, piece in enumerate(pieces):
        if not piece.strip():
            continue
        topics, entities = labels(piece)
        out.append(Chunk(chunk_id=f"f:{path}#{i}", path=path, kind="file", text=piece, ts=ts, valid_until=valid_until,
                         topic=topics[0] if topics else file_topic, entities=entities))
    return out


def labels(text: str) -> tuple[list[str], tuple[str, ...]]:
    """(topics in order, entities deduplicated) of the ``Topics:`` and ``Entities:`` lines in ``text``
    (the sleep cycle writes them under each night's heading of ``memories/<day>.md``)."""
    topics = [norm_label(t) for m in _TOPICS.finditer(text) for t in m.group(1).split(",") if t.strip()]
    entities = [norm_label(e) for m in _ENTITIES.finditer(text) for e in m.group(1).split(",") if e.strip()]
    return topics, tuple(dict.fromkeys(entities))


def _topic_of_path(path: str) -> str:
    """``topics/<slug>.md`` (the memory writer's topic files) are about their slug."""
    if path.startswith("topics/") and path.endswith(".md") and path.count("/") == 1:
        return norm_label(path[len("topics/"):-3])
    return ""


def _split(text: str) -> list[str]:
    if len(text.split()) <= WHOLE_FILE_WORDS:
        return [text.strip()]
    h1 = next((ln[2:].strip() for ln in text.splitlines() if ln.startswith("# ")), "")
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif not (line.startswith("# ") and line[2:].strip() == h1 and not sections[-1][0]):
            sections[-1][1].append(line)
    out = []
    for h2, lines in sections:
        body = "\n".join(lines).strip()
        if not body and not h2:
            continue
        title = " / ".join(t for t in (h1, h2) if t)
        for window in _windows(body):
            out.append(f"{title}\n\n{window}" if title else window)
    return out


def _windows(body: str) -> list[str]:
    words = body.split()
    if len(words) <= SECTION_MAX_WORDS:
        return [body]
    step = WINDOW_WORDS - OVERLAP_WORDS
    return [" ".join(words[i : i + WINDOW_WORDS]) for i in range(0, max(len(words) - OVERLAP_WORDS, 1), step)]


def _path_day(path: str) -> date | None:
    m = _DATE_IN_PATH.search(path)
    try:
        return date.fromisoformat(m.group(1)) if m else None
    except ValueError:
        return None


def _file_ts(path: str) -> float:
    """Dated files (``memories/2024-05-01.md``) decay with age; undated ones (USER.md, people/,
    topics/) are durable and do not. Not the mtime: rewriting a file must not make it "new"."""
    day = _path_day(path)
    return datetime.combine(day, time(), UTC).timestamp() if day else 0.0


def _expiry(text: str) -> float:
    """An ``Expires: <ISO date>`` (or ``valid_until:``) line makes the whole file an episode."""
    m = _EXPIRES.search(text)
    if not m:
        return NEVER
    try:
        when = datetime.fromisoformat(m.group(1))
    except ValueError:
        return NEVER
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
