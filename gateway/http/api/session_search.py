"""Session search with excerpts (seed 000): a person's past direct sessions that hold every word of the
query, as highlighted excerpts grouped by the day they were said, optionally one persona's only.

The sessions come from the transcript's full-text index (``State.turns.search_sessions``: case and
diacritics folded, every word required), so it works with the memory index down. Excerpts are cut
from the matching messages here: the words are found again with the same folding, and their places
are returned as character ranges of the excerpt (``highlights``), never as markup, so a client renders
them without interpreting text someone typed. Bounded: at most ``limit`` sessions, the first
``ROWS_PER_SESSION`` messages of each, ``EXCERPTS_PER_SESSION`` excerpts per session.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from gateway.config import PERSONA_NAME
from gateway.http.api.spec import Answer, Call, Query, Route
from gateway.state.records import TranscriptRow
from gateway.state.words import query_words

EXCERPT_CHARS = 240
ROWS_PER_SESSION = 2000
EXCERPTS_PER_SESSION = 3


class SearchQuery(Query):
    q: str = Field(min_length=1, max_length=500, description="words that must all occur (plain words, no syntax)")
    persona: str | None = Field(None, pattern=PERSONA_NAME, description="only sessions held with this persona")
    limit: int = Field(20, ge=1, le=50, description="at most this many sessions")


class ExcerptOut(Answer):
    session_id: str
    persona: str
    turn_id: str
    seq: int
    role: str
    at: datetime
    time: str = Field(description="HH:MM in the person's time zone")
    text: str = Field(description=f"the message around its first match, on one line, at most {EXCERPT_CHARS} "
                      "characters (+ '…' where cut)")
    highlights: list[tuple[int, int]] = Field(description="[start, end) character ranges of `text` that matched")


class DayOut(Answer):
    date: str = Field(description="YYYY-MM-DD in the person's time zone")
    excerpts: list[ExcerptOut]


class SearchResult(Answer):
    query: str
    persona: str | None
    days: list[DayOut] = Field(description="newest day first; excerpts within a day in the order they were said")


def _fold(text: str) -> tuple[str, list[int]]:
    """``text`` case- and diacritic-folded, with each folded character's index in ``text`` (so ranges
    found in the folded text map back to the original)."""
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        for part in unicodedata.normalize("NFKD", ch).casefold():
            if not unicodedata.combining(part):
                out.append(part)
                where.append(i)
    return "".join(out), where


def _terms(q: str) -> list[str]:
    # The index's tokens are runs of letters and digits: punctuation in the query separates words.
    words: list[str] = []
    for word in query_words(q):
        folded, _ = _fold(word)
        words.extend(w for w in "".join(c if c.isalnum() else " " for c in folded).split() if w not in words)
    return words


def _matches(text: str, terms: list[str]) -> list[tuple[int, int]] | None:
    """The ranges of ``text`` where a term is a whole word; None unless every term occurs."""
    folded, where = _fold(text)
    spans: list[tuple[int, int]] = []
    for term in terms:
        found = False
        start = folded.find(term)
        while start >= 0:
            after = start + len(term)
            if (start == 0 or not folded[start - 1].isalnum()) and not folded[after:after + 1].isalnum():
                found = True
                end = where[start + len(term) - 1] + 1
                spans.append((where[start], end))
            start = folded.find(term, start + 1)
        if not found:
            return None
    return sorted(set(spans))


def excerpt(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """A one-line window of ``text`` around its first match, and the matches inside it, as ranges of
    the window (control characters shown as spaces: the text was typed by someone)."""
    flat = "".join(" " if (c.isspace() or unicodedata.category(c) == "Cc") else c for c in text)
    first = spans[0][0] if spans else 0
    start = max(0, first - EXCERPT_CHARS // 3)
    end = min(len(flat), start + EXCERPT_CHARS)
    prefix = "…" if start else ""
    window = prefix + flat[start:end] + ("…" if end < len(flat) else "")
    shift = len(prefix) - start
    inside = [(s + shift, min(e, end) + shift) for s, e in spans if s >= start and s < end]
    return window, inside


def _zone(call: Call, uid: str) -> ZoneInfo:
    user = call.gateway.state.users.get(uid)
    try:
        return ZoneInfo(user.timezone if user is not None and user.timezone else "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def _hits(rows: list[TranscriptRow], terms: list[str]) -> list[tuple[TranscriptRow, str, list[tuple[int, int]]]]:
    out = []
    for row in rows:
        if row.role not in ("user", "assistant"):
            continue
        spans = _matches(row.content, terms)
        if spans:
            text, inside = excerpt(row.content, spans)
            out.append((row, text, inside))
            if len(out) >= EXCERPTS_PER_SESSION:
                break
    return out


async def search(call: Call) -> SearchResult:
    uid = call.user_id()
    query: SearchQuery = call.query
    state = call.gateway.state
    terms = _terms(query.q)
    days: dict[str, list[ExcerptOut]] = defaultdict(list)
    if terms:
        # A persona filter drops sessions after the search: ask for more so the page still fills.
        ids = state.turns.search_sessions(uid, " ".join(terms), limit=query.limit * (4 if query.persona else 1))
        zone = _zone(call, uid)
        kept = 0
        for sid in ids:
            session = state.sessions.get(sid)
            if session is None or session.scope_key != f"user:{uid}":
                continue  # only the person's own direct sessions (the index asks the same)
            if query.persona is not None and session.persona != query.persona:
                continue
            hits = _hits(state.turns.after(sid, 0, limit=ROWS_PER_SESSION), terms)
            if not hits:
                continue
            for row, text, inside in hits:
                local = row.created_at.astimezone(zone)
                days[local.strftime("%Y-%m-%d")].append(ExcerptOut(
                    session_id=sid, persona=session.persona, turn_id=row.turn_id, seq=row.seq, role=row.role,
                    at=row.created_at, time=local.strftime("%H:%M"), text=text, highlights=inside))
            kept += 1
            if kept >= query.limit:
                break
    return SearchResult(query=query.q, persona=query.persona, days=[
        DayOut(date=day, excerpts=sorted(days[day], key=lambda e: e.seq)) for day in sorted(days, reverse=True)
    ])  # fmt: skip


ROUTES = [
    Route("GET", "/api/users/{uid}/sessions/search", "past sessions as highlighted excerpts grouped by date",
          SearchResult, search, query=SearchQuery, tag="sessions",
          description="Full text (every word, case and accents folded) over the person's direct sessions; "
                      "persona= keeps the sessions held with that persona. Highlights are character ranges."),
]
