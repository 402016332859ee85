"""What kith recalls about a person for a query, and "forget this".

Recall is the hybrid search the prompt's recall section uses (``MemoryService.recall``) over the
person's own scope. Forgetting is ``gateway.memory.edit.forget.forget``: matching lines leave the
files (guarded store, audited, undoable), facts leave the graph and the index follows before the
answer, so the next recall no longer finds them. A broad or meaning-only match answers
``status="confirm"`` with a ``forget_id``; ``{"ref": "pending:<forget_id>"}`` (or ``confirm: true``
with the text) then applies it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from gateway.http.api.index import memory
from gateway.http.api.spec import Answer, ApiError, Body, Call, Query, Route
from gateway.memory.files.scopes import ScopeError, root_for, user_scope
from gateway.memory.search.index import narrowing


class HitOut(Answer):
    ref: str = Field(description="the chunk id; POST .../forget {\"ref\": ref} forgets exactly this")
    kind: str
    path: str
    text: str
    score: float
    date: str
    session_id: str
    scope: str = Field(description="the memory it came from: users/<id>")
    turn_ids: list[str] = Field(description="the turns a session chunk holds")
    speaker: str
    channel: str
    topic: str = Field("", description="the chunk's dominant topic (index payload field), \"\" when none")
    entities: list[str] = Field(default_factory=list, description="the entities the chunk names (payload field)")


class Hits(Answer):
    hits: list[HitOut]


KINDS = ("file", "turn")


class RecallQuery(Query):
    q: str = Field(min_length=1, max_length=1000)
    k: int = Field(8, ge=1, le=100)
    kinds: str = Field("", max_length=100, pattern=r"^[a-z,]*$",
                       description="comma-separated kinds to search (file, turn); empty: every kind")
    topic: str = Field("", max_length=200, description="only chunks of this dominant topic")
    entity: str = Field("", max_length=200, description="only chunks naming this entity")
    since: str = Field("", max_length=40, pattern=r"^(\d{4}-\d{2}-\d{2}.*)?$",
                       description="only memories dated on or after this day (YYYY-MM-DD) or instant (ISO)")

    def kind_list(self) -> list[str]:
        return [k for k in self.kinds.split(",") if k]


class ForgetBody(Body):
    text: str | None = Field(None, min_length=1, max_length=1000)
    ref: str | None = Field(None, min_length=1, max_length=1000)
    confirm: bool = False

    @model_validator(mode="after")
    def _one_of(self) -> ForgetBody:
        if (self.text is None) == (self.ref is None):
            raise ValueError('send either {"text": ...} or {"ref": ...}')
        return self


class ForgetReport(Answer):
    model_config = ConfigDict(extra="allow")
    status: str = Field(description="removed, confirm, nothing or refused")
    forget_id: str
    query: str
    lines: list[dict[str, Any]]
    facts: list[dict[str, Any]]
    points: int
    message: str


async def recall(call: Call) -> Hits:
    # A person's memory is their folder: the operator may search one the users table does not know
    # (files copied in, an import not finished), as `kith memory search` does without a daemon.
    uid = call.user_id(must_exist=False)
    try:
        known = call.gateway.state.users.get(uid) is not None or root_for(call.gateway.data_dir,
                                                                          user_scope(uid)).is_dir()  # fmt: skip
    except ScopeError as exc:
        raise ApiError(400, str(exc)) from None
    if not known:
        raise ApiError(404, "no such user")
    query: RecallQuery = call.query
    if not query.q.strip():
        return Hits(hits=[])
    kinds = query.kind_list()
    if unknown := [k for k in kinds if k not in KINDS]:
        raise ApiError(400, f"unknown kind {unknown[0]!r}; one of {', '.join(KINDS)}")
    try:
        narrow = narrowing(query.topic, query.entity, query.since)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    try:
        hits = await memory(call).recall(scope=user_scope(uid), query=query.q, k=query.k, kinds=kinds, narrow=narrow)
    except ScopeError as exc:
        raise ApiError(400, str(exc)) from None
    return Hits(hits=[HitOut(ref=h.chunk_id, kind=h.kind, path=h.source, text=h.text, score=h.score, date=h.date,
                             session_id=h.session_id, scope=h.scope, turn_ids=list(h.turn_ids), speaker=h.speaker,
                             channel=h.channel, topic=h.topic, entities=list(h.entities)) for h in hits])  # fmt: skip


async def forget(call: Call) -> ForgetReport:
    from gateway.memory.edit.forget import forget as forget_memory

    uid = call.user_id()
    memory(call)
    body: ForgetBody = call.body
    who = call.who()
    actor = f"web:{who.user_id}" if who.user_id else "operator"
    report = await forget_memory(call.gateway, uid, text=body.text, ref=body.ref, actor=actor, confirm=body.confirm)
    return ForgetReport.model_validate(report.to_dict())


ROUTES = [
    Route("GET", "/api/users/{uid}/recall", "what recall finds in the person's memory for a query", Hits, recall,
          query=RecallQuery, tag="memory", user_must_exist=False),
    Route("POST", "/api/users/{uid}/forget", "forget lines, facts and index entries matching a text or a ref",
          ForgetReport, forget, body=ForgetBody, tag="memory", errors=(400, 401, 404, 503)),
]
