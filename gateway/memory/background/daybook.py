"""The day's turns for the sleep cycle, fitted into a character budget.

Turns come from the transcript (``turns``), never from job payloads. A user's night reads the
sessions of their own direct conversations (scope ``user:<id>``); a group's night reads that group's
sessions (scope ``conv:<key>``): shared-room content never lands in a person's memory, and a person's
direct conversations never land in a room's. Off-The-Record sessions are not in the database at all.

Budget: conversations on interactive channels come first and get ``interactive_share`` of it; the
rest (automated channels: cron, briefings) gets what is left, including whatever interactive
conversations did not use. Inside a section each conversation gets an equal share; a conversation
over its share keeps its head and its tail (``head_share`` of the share from the start, the rest from
the end), because a day's conversation states its subject at the start and lands its decisions at
the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo

from gateway.state import State

MIN_SHARE = 400  # characters: below this a conversation cut to its share says nothing


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRow:
    seq: int
    session_id: str
    role: str
    content: str
    channel: str
    speaker: str
    user_id: str
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DayBook:
    text: str
    first_seq: int
    upto_seq: int  # every row up to here is covered (cut rows included: they were seen and budgeted)
    turns: int  # transcript rows read
    first_at: datetime | None
    last_at: datetime | None
    truncated: int  # conversations cut to their share

    @property
    def empty(self) -> bool:
        return self.turns == 0


def read_turns(
    state: State, *, scope_key: str, after_seq: int, before: datetime, limit: int = 100_000
) -> list[TurnRow]:
    """Transcript rows of sessions in ``scope_key`` (``user:<id>`` or ``conv:<key>``) after a watermark
    and strictly before ``before`` (the night's instant: turns of the next day wait for the next night)."""
    return [
        TurnRow(seq=r.seq, session_id=r.session_id, role=r.role, content=r.content, channel=r.channel,
                speaker=r.speaker, user_id=r.user_id, created_at=r.created_at)
        for r in state.turns.in_scope(scope_key, after_seq=after_seq, before=before, limit=limit)
    ]  # fmt: skip


def render_conversation(rows: list[TurnRow], tz: tzinfo) -> str:
    first = rows[0].created_at.astimezone(tz)
    head = f"### {rows[0].channel} conversation, {first:%Y-%m-%d %H:%M}"
    lines = [head]
    for r in rows:
        who = "assistant" if r.role == "assistant" else (r.speaker or "user")
        lines.append(f"[{r.created_at.astimezone(tz):%H:%M}] {who}: {' '.join(r.content.split())}")
    return "\n".join(lines) + "\n"


def head_tail(text: str, limit: int, head_share: float) -> str:
    """``text`` cut to about ``limit`` characters, keeping its start and its end."""
    if len(text) <= limit:
        return text
    marker = "\n[... {n} characters omitted ...]\n"
    room = max(limit - len(marker.format(n=len(text))), 0)
    head = int(room * head_share)
    tail = room - head
    omitted = len(text) - head - tail
    return text[:head] + marker.format(n=omitted) + (text[-tail:] if tail else "")


def _fit(convs: list[str], budget: int, head_share: float) -> tuple[list[str], int, int]:
    """Fit conversations into ``budget``; returns (texts, characters used, how many were cut)."""
    if not convs:
        return [], 0, 0
    out: list[str] = []
    used = cut = 0
    remaining = budget
    for i, text in enumerate(convs):
        # Equal share of what is left: short conversations hand their unused share to the later ones.
        share = max(remaining // (len(convs) - i), MIN_SHARE)
        piece = head_tail(text, share, head_share)
        cut += piece is not text
        out.append(piece)
        used += len(piece)
        remaining = max(remaining - len(piece), 0)
    return out, used, cut


def gather(
    rows: list[TurnRow],
    *,
    budget: int,
    interactive_share: float,
    head_share: float,
    automated_channels: tuple[str, ...] | list[str],
    tz: tzinfo,
) -> DayBook:
    if not rows:
        return DayBook(text="", first_seq=0, upto_seq=0, turns=0, first_at=None, last_at=None, truncated=0)
    by_session: dict[str, list[TurnRow]] = {}
    for r in rows:
        by_session.setdefault(r.session_id, []).append(r)
    automated = set(automated_channels)
    interactive = [render_conversation(c, tz) for c in by_session.values() if c[0].channel not in automated]
    other = [render_conversation(c, tz) for c in by_session.values() if c[0].channel in automated]
    first_budget = int(budget * interactive_share) if other else budget
    inter_texts, used, cut1 = _fit(interactive, first_budget, head_share)
    other_texts, _, cut2 = _fit(other, budget - used, head_share)
    parts = []
    if inter_texts:
        parts.append("## Interactive conversations\n\n" + "\n".join(inter_texts))
    if other_texts:
        parts.append("## Automated conversations\n\n" + "\n".join(other_texts))
    return DayBook(
        text="\n".join(parts),
        first_seq=rows[0].seq,
        upto_seq=rows[-1].seq,
        turns=len(rows),
        first_at=rows[0].created_at,
        last_at=rows[-1].created_at,
        truncated=cut1 + cut2,
    )
