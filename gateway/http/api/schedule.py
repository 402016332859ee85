"""A person's schedule (reminders, scheduled prompts, task alerts) and cancelling one item.

The person sees their own (``/api/users/me/schedule``), the operator anyone's and the overview of
everyone who has something scheduled (``/api/schedule``). The files are the truth
(``gateway.schedule.listing``): a cancel marks the item in its file, so an armed job delivers nothing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from gateway.http.api.spec import Answer, ApiError, Call, Query, Route
from gateway.schedule import engine
from gateway.schedule.items import FILES
from gateway.schedule.listing import cancel, schedule_of_user


class ItemOut(Answer):
    id: str
    kind: str = Field(description="reminder | prompt | task")
    text: str
    when: str = Field(description="as the person reads it, e.g. 'every weekday at 08:00'")
    rule: str = Field(description="rrule:... or cron:...; empty for a one-shot item")
    status: str = Field(description="pending | sent | cancelled | done | disabled")
    next_due: str = Field(description="UTC instant it fires next; empty when it will not fire again")
    last: str
    file: str


class ProblemOut(Answer):
    file: str
    line: int = Field(description="line (REMINDERS.md) or entry number (JSON files); 0: the whole file")
    message: str
    text: str


class ScheduleOut(Answer):
    user_id: str
    timezone: str
    items: list[ItemOut]
    problems: list[ProblemOut]


class Cancelled(Answer):
    cancelled: ItemOut


class UserSchedule(Answer):
    user_id: str
    timezone: str
    active: int
    next_due: str
    problems: int


class Overview(Answer):
    users: list[UserSchedule]


class OverviewQuery(Query):
    limit: int = Field(200, ge=1, le=5000)


def _out(call: Call, uid: str) -> ScheduleOut:
    gw = call.gateway
    if gw.memory is None:
        raise ApiError(503, "memory is not open")
    tz = engine.user_zone(gw, uid)
    items, problems = schedule_of_user(gw.memory_store(uid), tz, datetime.now(UTC))
    return ScheduleOut(user_id=uid, timezone=tz, items=[ItemOut(**v.as_dict()) for v in items],
                       problems=[ProblemOut(file=p.file, line=p.line, message=p.message, text=p.text)
                                 for p in problems])


async def get_schedule(call: Call) -> ScheduleOut:
    return _out(call, call.user_id())


async def cancel_item(call: Call) -> Cancelled:
    uid = call.user_id()
    gw = call.gateway
    if gw.memory is None:
        raise ApiError(503, "memory is not open")
    done = cancel(gw.memory_store(uid), call.param("id"), engine.user_zone(gw, uid), datetime.now(UTC),
                  source="api:schedule")
    if done is None:
        raise ApiError(404, "no active item with that id")
    return Cancelled(cancelled=ItemOut(**done.as_dict()))


async def overview(call: Call) -> Overview:
    gw = call.gateway
    if gw.memory is None:
        raise ApiError(503, "memory is not open")
    query: OverviewQuery = call.query
    users_dir = Path(gw.data_dir) / "users"
    names = await asyncio.to_thread(
        lambda: sorted(p.name for p in users_dir.iterdir() if p.is_dir() and any((p / f).exists() for f in FILES))
        if users_dir.exists() else [])
    out = []
    for uid in names[: query.limit]:
        if gw.state.users.get(uid) is None:
            continue
        s = _out(call, uid)
        active = [i for i in s.items if i.next_due]
        out.append(UserSchedule(user_id=uid, timezone=s.timezone, active=len(active),
                                next_due=min((i.next_due for i in active), default=""), problems=len(s.problems)))
    return Overview(users=out)


ROUTES = [
    Route("GET", "/api/users/{uid}/schedule", "the person's reminders, scheduled prompts and task alerts",
          ScheduleOut, get_schedule, tag="schedule",
          description="Each item with its next due time (UTC) in the person's zone, and the lines of their "
                      "files that could not be scheduled."),
    Route("DELETE", "/api/users/{uid}/schedule/{id}", "cancel one scheduled item", Cancelled, cancel_item,
          tag="schedule", description="Marks it in its file: a reminder [-], a prompt enabled=false, a task's "
                                      "alert alert=false."),
    Route("GET", "/api/schedule", "everyone with something scheduled (operator)", Overview, overview,
          query=OverviewQuery, operator=True, tag="schedule", errors=(400, 401, 403)),
]
