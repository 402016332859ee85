"""A person's knowledge-graph facts as a timeline, and deleting a wrong one.

Facts come from the graph (``gateway/memory/knowledge/graph.py``), the rows the prompt's known-facts
section selects from, so a fact deleted here is absent from the next prompt. ``superseded_by`` names
the fact that closed this one: a later value of the same single-valued predicate about the same
subject, starting where this one ends (the graph's supersession rule).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from gateway.http.api.spec import Answer, ApiError, Call, Query, Route
from gateway.memory.knowledge import predicates as preds
from gateway.memory.knowledge.graph import Fact, KnowledgeGraph


class FactOut(Answer):
    id: int
    subject: str
    predicate: str
    object: str
    valid_from: datetime
    valid_to: datetime | None = Field(description="when it stopped being true; null: still true")
    superseded_by: int | None
    confidence: float
    source: str = Field(description="where it came from: <source type>[:<source ref>]")
    current: bool


class FactList(Answer):
    facts: list[FactOut]


class FactQuery(Query):
    include_superseded: bool = Field(False, description="also the facts that are no longer true")


class Deleted(Answer):
    deleted: int


def _graph(call: Call) -> KnowledgeGraph:
    if call.gateway.kg is None:
        raise ApiError(503, "the knowledge graph is not open")
    return call.gateway.kg


def superseders(facts: list[Fact]) -> dict[int, int]:
    """fact id -> id of the fact that superseded it."""
    starts: dict[tuple[str, str, datetime], int] = {}
    for f in facts:
        if preds.supersedes(f.predicate):
            starts.setdefault((preds.normalize_entity(f.subject), f.predicate, f.valid_from), f.id)
    out = {}
    for f in facts:
        if f.valid_until is not None and preds.supersedes(f.predicate):
            later = starts.get((preds.normalize_entity(f.subject), f.predicate, f.valid_until))
            if later is not None and later != f.id:
                out[f.id] = later
    return out


async def list_facts(call: Call) -> FactList:
    uid = call.user_id()
    kg = _graph(call)
    query: FactQuery = call.query
    everything = kg.all(uid)
    current_ids = {f.id for f in kg.current(uid)}
    closed_by = superseders(everything)
    facts = everything if query.include_superseded else [f for f in everything if f.id in current_ids]
    return FactList(facts=[
        FactOut(id=f.id, subject=f.subject, predicate=f.predicate, object=f.object, valid_from=f.valid_from,
                valid_to=f.valid_until, superseded_by=closed_by.get(f.id), confidence=f.confidence,
                source=f"{f.source_type}:{f.source_ref}" if f.source_ref else f.source_type,
                current=f.id in current_ids)
        for f in sorted(facts, key=lambda f: (f.valid_from, f.id))
    ])  # fmt: skip


async def delete_fact(call: Call) -> Deleted:
    uid = call.user_id()
    kg = _graph(call)
    fact_id = int(call.param("id"))
    fact = kg.get(fact_id)
    if fact is None or fact.user_id != uid:
        raise ApiError(404, "no such fact")
    kg.delete(fact_id)
    return Deleted(deleted=fact_id)


ID = {"id": {"type": "integer"}}
ROUTES = [
    Route("GET", "/api/users/{uid}/facts", "the person's facts (with include_superseded: the whole timeline)",
          FactList, list_facts, query=FactQuery, tag="facts"),
    Route("DELETE", "/api/users/{uid}/facts/{id}", "delete a wrong fact (gone from the next prompt)", Deleted,
          delete_fact, params=ID, tag="facts"),
]
