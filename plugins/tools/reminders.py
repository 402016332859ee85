"""The ``reminders`` tool (tier 2, writes): one-shot and recurring reminders in ``REMINDERS.md``.

``preview`` says back how a time or a repetition was understood (the model shows it to the person
before ``add``), ``add`` writes the line and arms it, ``list`` / ``cancel`` by id. The file format,
the parsing and the firing are the host's (``gateway.schedule``: items, rules, engine); a hand-added
line is read the same way. ``reminder_due`` is the job name of reminders armed before the schedule
existed: it hands them to the schedule's ``fire`` (a job still queued from then is delivered once).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from gateway.schedule import engine
from gateway.schedule.items import (
    CRONS,
    REMINDERS,
    REMINDERS_HEADER,
    Item,
    new_id,
    parse_crons,
    reminder_line,
    set_reminder,
    stamp,
)
from gateway.schedule.items import parse_reminders as parse_items
from gateway.schedule.listing import cancel as cancel_item
from gateway.schedule.rules import Recurrence, RuleError, next_occurrence, parse_phrase
from gateway.schedule.zones import to_instant, zone
from gateway.tools import Tool, ToolContext, ToolError
from plugins.tools.common import str_arg, write_kwargs

if TYPE_CHECKING:
    from gateway.bus.context import JobContext
    from gateway.services import Services

log = logging.getLogger("kith.tools")

REMINDER_JOB = "reminder_due"
__all__ = ["REMINDERS", "REMINDER_JOB", "TOOL", "Reminder", "parse_reminders", "render_reminders"]


@dataclass(frozen=True, slots=True)
class Reminder:
    id: str
    due: datetime | None  # UTC; a recurring reminder's next occurrence
    text: str  # the visible part: "<when> (<tz>) <what>"
    status: str  # pending | sent | cancelled
    what: str = ""
    rule: str = ""


def parse_reminders(text: str, tz_name: str | None = None, now: datetime | None = None) -> list[Reminder]:
    """The reminders of ``text``; ``tz_name`` is the person's zone (None: unknown, shown only where a
    line names its own)."""
    now = now or datetime.now(UTC)
    tz = zone(tz_name or "UTC")
    out = []
    for item in parse_items(text, tz_name or "UTC", now).items:
        due = item.due if item.rule is None else item.next_due(tz, now)
        shown = item.zone or tz_name
        out.append(Reminder(id=item.id, due=due, text=f"{item.when} ({shown}) {item.text}" if shown else
                            f"{item.when} {item.text}", status=item.status, what=item.text,
                            rule=item.rule.text if item.rule else ""))
    return out


def render_reminders(text: str, now: datetime | None = None, tz_name: str | None = None) -> str:
    """The pending reminders for the prompt, soonest first, with ids the model can cancel by."""
    now = now or datetime.now(UTC)
    far = datetime.max.replace(tzinfo=UTC)
    pending = sorted((r for r in parse_reminders(text, tz_name, now) if r.status == "pending"),
                     key=lambda r: r.due or far)
    lines = [f"- {r.id}: {r.text}" + (" (overdue)" if r.due and r.due < now and not r.rule else "")
             for r in pending]
    return "\n".join(lines)


def _one_shot(args: Mapping[str, Any], tz_name: str, now: datetime) -> datetime:
    minutes = args.get("in_minutes")
    at = args.get("at")
    if minutes is not None:
        if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or minutes <= 0:
            raise ToolError("'in_minutes' must be a positive number")
        return now + timedelta(minutes=float(minutes))
    if not isinstance(at, str) or not at.strip():
        raise ToolError("give 'at' (local date and time, e.g. 2026-05-10T09:00), 'in_minutes' or 'repeat'")
    try:
        when = datetime.fromisoformat(at.strip())
    except ValueError:
        raise ToolError(f"'at' must be an ISO date and time like 2026-05-10T09:00, got {at!r}") from None
    tz = zone(tz_name)
    # The person's own clock; a time DST skips means the same moment shifted forward (docs/proactive.md).
    due = to_instant(when, tz) if when.tzinfo is None else when.astimezone(UTC)
    if due <= now:
        raise ToolError(f"{due.astimezone(tz):%Y-%m-%d %H:%M} is in the past; "
                        f"it is now {now.astimezone(tz):%Y-%m-%d %H:%M}")
    return due


def _understood(args: Mapping[str, Any], tz_name: str, now: datetime) -> tuple[Recurrence | None, datetime]:
    """(rule or None, first due instant), or a ToolError saying what was not understood."""
    repeat = str_arg(args, "repeat", max_len=200)
    if not repeat:
        return None, _one_shot(args, tz_name, now)
    try:
        rule = parse_phrase(repeat, today=now.astimezone(zone(tz_name)).date())
    except RuleError as exc:
        raise ToolError(str(exc)) from None
    first = next_occurrence(rule, zone(tz_name), now)
    if first is None:
        raise ToolError(f"{repeat!r} never happens")
    return rule, first


def _said_back(rule: Recurrence | None, first: datetime, tz_name: str) -> str:
    local = first.astimezone(zone(tz_name))
    if rule is None:
        return f"{local:%A %Y-%m-%d %H:%M} ({tz_name})"
    return f"{rule.describe()} ({tz_name}), first on {local:%A %Y-%m-%d %H:%M} [{rule.text}]"


async def reminders_tool(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    action = str_arg(args, "action", required=True)
    store = ctx.store
    user = ctx.turn.user
    tz_name = zone(user.timezone if user else "UTC").key
    now = engine.schedule_of(ctx.gateway).clock.now()
    current = store.read(REMINDERS) if store.exists(REMINDERS) else ""
    crons = store.read(CRONS) if store.exists(CRONS) else ""
    if action == "list":
        prompts = "\n".join(f"- {i.id}: {i.when} ({tz_name}) run the prompt: {i.text}"
                            for i in parse_crons(crons, tz_name, now).items if i.active)
        return "\n".join(x for x in (render_reminders(current, now, tz_name), prompts) if x) or "No pending reminders."
    if action == "cancel":
        rid = str_arg(args, "id", required=True, max_len=40)
        if rid.startswith("c"):
            done = cancel_item(store, rid, tz_name, now, source="tool:reminders")
            if done is None:
                raise ToolError(f"no active scheduled prompt {rid!r}")
            return f"Scheduled prompt {rid} cancelled."
        pending = {r.id for r in parse_reminders(current, tz_name, now) if r.status == "pending"}
        new, changed = set_reminder(current, rid, status="cancelled") if rid in pending else (current, False)
        if not changed:
            listed = render_reminders(current, now, tz_name) or "none"
            raise ToolError(f"no pending reminder {rid!r}; pending: {listed}")
        store.write(REMINDERS, new, **write_kwargs(ctx, "reminders"))
        return f"Reminder {rid} cancelled."
    if action not in ("add", "preview"):
        raise ToolError("'action' must be one of preview, add, list, cancel")
    rule, first = _understood(args, tz_name, now)
    prompt = str_arg(args, "prompt", max_len=2000)
    if prompt and rule is None:
        raise ToolError("a scheduled prompt repeats: give 'repeat' (e.g. 'every weekday at 8')")
    if action == "preview":
        what = f" I will run the prompt {prompt!r} then and send them the answer." if prompt else ""
        return f"Understood as: {_said_back(rule, first, tz_name)}.{what} Confirm with the person, then 'add'."
    if prompt:
        return await _add_prompt(ctx, crons, prompt, str_arg(args, "repeat", max_len=200), rule, first, tz_name,
                                 now)
    what = str_arg(args, "text", required=True, max_len=500).replace("\n", " ").replace("-->", "->")
    if ctx.gateway.bus is None:
        raise ToolError("reminders are not available right now")
    msg = ctx.turn.message
    origin = f"{msg.channel}:{msg.conversation_id or msg.account_id}"
    rid = new_id("r")
    if rule is None:
        local = first.astimezone(zone(tz_name))
        item = Item("reminder", rid, what, "pending", due=first, when=f"{local:%Y-%m-%d %H:%M}", origin=origin)
    else:
        item = Item("reminder", rid, what, "pending", rule=rule, since=now, when=rule.describe(), origin=origin)
    body = current if current.strip() else REMINDERS_HEADER
    if not body.endswith("\n"):
        body += "\n"
    store.write(REMINDERS, body + reminder_line(item, tz_name) + "\n", **write_kwargs(ctx, "reminders"))
    await engine.sync_user(ctx.gateway, ctx.user_id, (REMINDERS,))
    return f"Reminder {rid} set for {_said_back(rule, first, tz_name)}."


async def _add_prompt(ctx: ToolContext, raw: str, prompt: str, repeat: str, rule: Recurrence | None,
                      first: datetime, tz_name: str, now: datetime) -> str:
    """A scheduled prompt in CRONS.json (the file may hold entries by hand: they are kept as they are)."""
    assert rule is not None
    try:
        data = json.loads(raw) if raw.strip() else {"crons": []}
    except ValueError:
        raise ToolError(f"{CRONS} is not valid JSON; fix it by hand first") from None
    entries = data.get("crons") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ToolError(f'{CRONS} has no "crons" list; fix it by hand first')
    cid = new_id("c")
    entries.append({"id": cid, "when": repeat, "prompt": prompt.replace("\n", " "), "rule": rule.text,
                    "created": stamp(now)})
    ctx.store.write(CRONS, json.dumps(data, ensure_ascii=False, indent=2) + "\n", **write_kwargs(ctx, "reminders"))
    await engine.sync_user(ctx.gateway, ctx.user_id, (CRONS,))
    return f"Scheduled prompt {cid} set for {_said_back(rule, first, tz_name)}."


async def reminder_due(ctx: JobContext, payload: dict[str, Any]) -> None:
    """A ``reminder_due`` job queued before the schedule: the schedule fires it (once, by id)."""
    await engine.fire(ctx.gateway, {"user_id": payload["user_id"], "kind": "reminder",
                                    "item_id": payload["reminder_id"]})


def _has_bus(gateway: Services) -> bool:
    return gateway.bus is not None


TOOL = Tool(
    name="reminders",
    description=("Reminders for the person, in their time zone. 'preview' first: it says how 'at'/'in_minutes' "
                 "or 'repeat' was understood; tell the person and 'add' once they agree. 'repeat' is a phrase "
                 "('every weekday at 8', 'on Sunday evenings', 'every 2 weeks on Tuesday at 10:30', 'every month "
                 "on the 1st') or an RRULE/cron expression. With 'prompt' instead of a reminder text it is a "
                 "scheduled prompt: when due, the prompt is run as a message from them and the answer sent "
                 "('every weekday at 8' + 'give me a briefing'). 'list' pending ones, 'cancel' by id."),
    input_schema={"type": "object", "properties": {
        "action": {"type": "string", "enum": ["preview", "add", "list", "cancel"]},
        "text": {"type": "string", "description": "what to remind them of (add)"},
        "at": {"type": "string", "description": "local date and time, e.g. 2026-05-10T09:00 (one-shot)"},
        "in_minutes": {"type": "number", "description": "alternative to 'at': minutes from now (one-shot)"},
        "repeat": {"type": "string", "description": "a repetition, e.g. 'every weekday at 8' (recurring)"},
        "prompt": {"type": "string", "description": "a scheduled prompt to run when due (with 'repeat')"},
        "id": {"type": "string", "description": "reminder id (cancel)"},
    }, "required": ["action"]},
    handler=reminders_tool, writes=True, available=_has_bus,
)
