"""A person's past conversations, managed: renamed, continued, exported as Markdown, deleted
(docs/api.md, docs/web.md#past-conversations).

Only the person's own direct sessions (scope ``user:<id>``), as for listing them; anyone else's is a 404.

* rename: a title of the person's own (an empty one goes back to the first message);
* continue: the conversation becomes the open one of the person's direct scope again (the one open
  until now ends), so their next message on any channel continues it, with its history;
* export: the messages as a Markdown file, oldest first;
* delete: ``gateway.memory.edit.drop_session``: the conversation leaves the transcript, its search,
  the session logs and the memory index; derived memory (facts, notes) stays and is counted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

from aiohttp import web
from pydantic import Field

from gateway.http.api.sessions import SessionOut, out
from gateway.http.api.spec import Answer, ApiError, Body, Call, Route
from gateway.memory.edit.drop_session import drop_session
from gateway.state import SessionSummary
from gateway.state.stores.sessions import TITLE_CHARS

EXPORT_ROWS = 20_000  # a conversation longer than this is exported up to here (and says so)
SID = "/api/users/{uid}/sessions/{sid}"


class Rename(Body):
    title: str = Field(max_length=TITLE_CHARS, description="the new title; empty: the first message again")


class Deleted(Answer):
    session_id: str
    messages: int = Field(description="messages deleted from the transcript")
    log_blocks: int = Field(description="turns removed from the session logs")
    facts_kept: int = Field(description="facts learned from this conversation, kept (forget them in the console)")


def _own(call: Call) -> tuple[str, str]:
    uid = call.user_id()
    sid = call.param("sid")
    if call.gateway.state.sessions.scope_of(sid) != f"user:{uid}":
        raise ApiError(404, "no such session")
    return uid, sid


def _summary(call: Call, uid: str, sid: str) -> SessionSummary:
    found = call.gateway.state.sessions.summaries(uid, [sid])
    if not found:
        raise ApiError(404, "no such session")
    return found[0]


async def rename(call: Call) -> SessionOut:
    uid, sid = _own(call)
    body: Rename = call.body
    title = " ".join(body.title.split())
    call.gateway.state.sessions.set_title(sid, user_id=uid, title=title, at=datetime.now(UTC))
    return out(call, _summary(call, uid, sid))


async def resume(call: Call) -> SessionOut:
    uid, sid = _own(call)
    if f"user:{uid}" in call.gateway.sessions.otr:
        raise ApiError(409, "Off-The-Record is on: turn it off first, then continue this conversation")
    call.gateway.state.sessions.reopen(sid, datetime.now(UTC))
    return out(call, _summary(call, uid, sid))


def _markdown(summary: SessionSummary, rows: list[tuple[str, str, datetime]], cut: bool) -> str:
    lines = [f"# {summary.title or 'Conversation'}", "",
             f"Started {summary.started_at:%Y-%m-%d %H:%M} UTC · {summary.channel or 'kith'} · "
             f"{summary.turns} message{'' if summary.turns == 1 else 's'}", ""]  # fmt: skip
    for speaker, text, at in rows:
        lines += [f"## {speaker} · {at:%Y-%m-%d %H:%M} UTC", "", text.rstrip(), ""]
    if cut:
        lines += [f"*(cut after {EXPORT_ROWS:,} messages)*", ""]
    return "\n".join(lines)


async def export(call: Call) -> web.StreamResponse:
    uid, sid = _own(call)
    summary = _summary(call, uid, sid)
    rows = call.gateway.state.turns.after(sid, 0, limit=EXPORT_ROWS + 1)
    cut = len(rows) > EXPORT_ROWS
    said = [("kith" if r.role == "assistant" else (r.speaker or "you"), r.content, r.created_at)
            for r in rows[:EXPORT_ROWS] if r.role in ("user", "assistant")]  # fmt: skip
    name = f"kith-{summary.started_at:%Y-%m-%d}-{sid[:8]}.md"
    return web.Response(text=_markdown(summary, said, cut), content_type="text/markdown", charset="utf-8",
                        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
                                 "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})  # fmt: skip


async def delete(call: Call) -> Deleted:
    uid, sid = _own(call)
    report = await drop_session(call.gateway, uid, sid)
    return Deleted(session_id=sid, messages=report.messages, log_blocks=report.log_blocks,
                   facts_kept=report.facts_kept)  # fmt: skip


ROUTES = [
    Route("PATCH", SID, "rename a past conversation", SessionOut, rename, body=Rename, tag="sessions",
          errors=(400, 401, 404)),
    Route("POST", SID + "/continue", "continue a past conversation (it becomes the open one)", SessionOut, resume,
          tag="sessions", errors=(401, 404, 409),
          description="The conversation open until now ends; the person's next message on any channel "
                      "continues this one, with its history. 409 while Off-The-Record is on."),
    Route("GET", SID + "/export", "a conversation as a Markdown file", Answer, export, tag="sessions",
          raw_answer=True, errors=(401, 404)),
    Route("DELETE", SID, "delete a conversation: transcript, search, session logs, index", Deleted, delete,
          tag="sessions", errors=(401, 404),
          description="Memory derived from it (facts, notes) is kept and counted in facts_kept; forget it "
                      "in the console or with /forget."),
]
