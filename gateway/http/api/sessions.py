"""A person's past conversations: listed by date, searched (full text or semantic), read page by page.

Only the person's direct sessions (scope ``user:<id>``, which continue across their channels) are
listed: a group's transcript holds other people's messages and belongs to the group. Full-text search
is the transcript's FTS5 index (``State.turns.search_sessions``); semantic search is the memory
recall over the session turns the indexer keeps (``kinds=("turn",)``), the same ranking as
``kith sessions search``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, Field

from gateway.http.api import sessions_media
from gateway.http.api.spec import Answer, ApiError, Call, Query, Route
from gateway.memory.files.scopes import ScopeError, user_scope
from gateway.state import SessionSummary


class SessionOut(Answer):
    session_id: str
    channel: str
    started_at: datetime
    last_active_at: datetime
    ended_at: datetime | None
    title: str
    turns: int
    open: bool = Field(description="the session a new message would continue")
    renamed: bool = Field(False, description="the title is one the person gave it (else: its first message)")


class SessionList(Answer):
    sessions: list[SessionOut]


class SessionQuery(Query):
    q: str | None = Field(None, max_length=500, description="search text; absent: list by date")
    mode: Literal["text", "semantic"] = "text"
    limit: int = Field(20, ge=1, le=100)
    before: AwareDatetime | None = Field(None, description="list sessions started before this instant")


class Message(Answer):
    seq: int
    role: str
    text: str
    at: datetime | None = Field(description="when it was said; null when the stored time is damaged")
    turn_id: str
    channel: str
    speaker: str


class MessagePage(Answer):
    session_id: str
    messages: list[Message]
    more: bool = Field(description="earlier messages exist: ask again with before_seq = messages[0].seq")


class MessageQuery(Query):
    before_seq: int | None = Field(None, ge=1, le=2**62)
    limit: int = Field(50, ge=1, le=200)


def out(call: Call, s: SessionSummary) -> SessionOut:
    now = datetime.now(UTC)
    open_ = s.ended_at is None and now - s.last_active_at <= call.gateway.sessions.idle_gap
    return SessionOut(session_id=s.session_id, channel=s.channel, started_at=s.started_at,
                      last_active_at=s.last_active_at, ended_at=s.ended_at, title=s.title, turns=s.turns,
                      open=open_, renamed=s.renamed)  # fmt: skip


async def _semantic(call: Call, uid: str, q: str, limit: int) -> list[str]:
    memory = call.gateway.memory
    if memory is None or memory.detached:
        raise ApiError(503, "this process has no memory index; use mode=text")
    try:
        hits = await memory.recall(scope=user_scope(uid), query=q, k=limit * 4, kinds=("turn",))
    except ScopeError as exc:
        raise ApiError(400, str(exc)) from None
    ids = dict.fromkeys(h.session_id for h in hits if h.session_id)
    return list(ids)[:limit]


async def list_sessions(call: Call) -> SessionList:
    uid = call.user_id()
    query: SessionQuery = call.query
    sessions = call.gateway.state.sessions
    q = (query.q or "").strip()
    if not q:
        found = sessions.of_user(uid, before=query.before, limit=query.limit)
    else:
        if query.mode == "semantic":
            ids = await _semantic(call, uid, q, query.limit)
        else:
            ids = call.gateway.state.turns.search_sessions(uid, q, limit=query.limit)
        found = sessions.summaries(uid, ids)
    return SessionList(sessions=[out(call, s) for s in found])


async def messages(call: Call) -> MessagePage:
    uid = call.user_id()
    sid = call.param("sid")
    # Only the scope is read: a session row with a damaged time still shows its messages.
    if call.gateway.state.sessions.scope_of(sid) != f"user:{uid}":
        raise ApiError(404, "no such session")
    query: MessageQuery = call.query
    rows = call.gateway.state.turns.page(sid, before_seq=query.before_seq, limit=query.limit + 1)
    more = len(rows) > query.limit
    rows = rows[1:] if more else rows
    return MessagePage(session_id=sid, more=more, messages=[
        Message(seq=r.seq, role=r.role, text=r.content, at=r.created_at, turn_id=r.turn_id, channel=r.channel,
                speaker=r.speaker)
        for r in rows
    ])  # fmt: skip


ROUTES = [
    Route("GET", "/api/users/{uid}/sessions", "past sessions by date, or found by full-text or semantic search",
          SessionList, list_sessions, query=SessionQuery, tag="sessions"),
    Route("GET", "/api/users/{uid}/sessions/{sid}/messages", "a session's messages, newest page first",
          MessagePage, messages, query=MessageQuery, tag="sessions",
          description="Messages are oldest first within a page; page back with before_seq."),
    # The files those messages link to (served beside them, so the host's table needs no new line).
    *sessions_media.ROUTES,
]
