"""The ``reminders`` tool (tier 2, writes) and the ``reminder_due`` job that delivers each reminder.

``add`` / ``list`` / ``cancel`` reminders in ``REMINDERS.md``; a delayed bus job (ids only in its
payload) sends each one to the conversation it was set in when due, then marks it sent.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from gateway.text import split_text
from gateway.tools import Tool, ToolContext, ToolError
from gateway.types import ConversationAddress, ConversationKind, Reply
from plugins.tools.common import str_arg, write_kwargs

if TYPE_CHECKING:
    from gateway.app import Gateway
    from gateway.bus.context import JobContext

log = logging.getLogger("kith.tools")

REMINDERS = "REMINDERS.md"
REMINDER_JOB = "reminder_due"


# ``- [ ] 2026-05-10 09:00 (Europe/Berlin) call Sam <!-- reminder id=r1a2b3c due=2026-05-10T07:00:00Z -->``
# The visible part is for people; the comment carries what the delivery job needs, exactly.
_REMINDER = re.compile(
    r"^- \[(?P<mark>[ x-])\] (?P<body>.*?)\s*<!-- reminder id=(?P<id>r[0-9a-f]+) due=(?P<due>\S+)"
    r"(?: sent=(?P<sent>\S+))? -->\s*$"
)
REMINDERS_HEADER = "# Reminders\n\n"


@dataclass(frozen=True, slots=True)
class Reminder:
    id: str
    due: datetime  # UTC
    text: str  # the visible part: "<local time> (<tz>) <what>"
    status: str  # pending | sent | cancelled

    @property
    def what(self) -> str:
        parts = self.text.split(") ", 1)
        return parts[1] if len(parts) == 2 else self.text


def parse_reminders(text: str) -> list[Reminder]:
    out = []
    for line in text.splitlines():
        m = _REMINDER.match(line)
        if not m:
            continue
        try:
            due = datetime.fromisoformat(m["due"].replace("Z", "+00:00")).astimezone(UTC)
        except ValueError:
            continue
        status = {" ": "pending", "x": "sent", "-": "cancelled"}[m["mark"]]
        out.append(Reminder(id=m["id"], due=due, text=m["body"], status=status))
    return out


def render_reminders(text: str, now: datetime | None = None) -> str:
    """The pending reminders for the prompt, soonest first, with ids the model can cancel by."""
    pending = sorted((r for r in parse_reminders(text) if r.status == "pending"), key=lambda r: r.due)
    now = now or datetime.now(UTC)
    lines = [f"- {r.id}: {r.text}" + (" (overdue)" if r.due < now else "") for r in pending]
    return "\n".join(lines)


def _set_mark(text: str, rid: str, mark: str, extra: str = "") -> tuple[str, bool]:
    out, changed = [], False
    for line in text.splitlines():
        m = _REMINDER.match(line)
        if m and m["id"] == rid and m["mark"] == " ":
            line = f"- [{mark}] {line.rstrip()[6:]}"
            if extra:
                line = line[: line.rindex(" -->")] + f" {extra} -->"
            changed = True
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), changed


def _parse_when(args: Mapping[str, Any], tz: ZoneInfo, now: datetime) -> datetime:
    minutes = args.get("in_minutes")
    at = args.get("at")
    if minutes is not None:
        if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or minutes <= 0:
            raise ToolError("'in_minutes' must be a positive number")
        return now + timedelta(minutes=float(minutes))
    if not isinstance(at, str) or not at.strip():
        raise ToolError("give 'at' (local date and time, e.g. 2026-05-10T09:00) or 'in_minutes'")
    try:
        when = datetime.fromisoformat(at.strip())
    except ValueError:
        raise ToolError(f"'at' must be an ISO date and time like 2026-05-10T09:00, got {at!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz)  # the person's own clock, like every time in their prompt
    if when <= now:
        raise ToolError(f"{when.isoformat()} is in the past; it is now {now.astimezone(tz):%Y-%m-%d %H:%M}")
    return when.astimezone(UTC)


async def reminders_tool(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    action = str_arg(args, "action", required=True)
    store = ctx.store
    current = store.read(REMINDERS) if store.exists(REMINDERS) else ""
    if action == "list":
        return render_reminders(current) or "No pending reminders."
    if action == "cancel":
        rid = str_arg(args, "id", required=True, max_len=40)
        new, changed = _set_mark(current, rid, "-")
        if not changed:
            raise ToolError(f"no pending reminder {rid!r}; pending: {render_reminders(current) or 'none'}")
        store.write(REMINDERS, new, **write_kwargs(ctx, "reminders"))
        return f"Reminder {rid} cancelled."
    if action != "add":
        raise ToolError("'action' must be one of add, list, cancel")
    what = str_arg(args, "text", required=True, max_len=500).replace("\n", " ").replace("-->", "->")
    user = ctx.turn.user
    tz_name = user.timezone if user else "UTC"
    try:
        tz = ZoneInfo(tz_name)
    except Exception:
        tz_name, tz = "UTC", ZoneInfo("UTC")
    now = datetime.now(UTC)
    due = _parse_when(args, tz, now)
    bus = ctx.gateway.bus
    if bus is None:
        raise ToolError("reminders are not available right now")
    rid = "r" + secrets.token_hex(4)
    local = due.astimezone(tz)
    line = (f"- [ ] {local:%Y-%m-%d %H:%M} ({tz_name}) {what} "
            f"<!-- reminder id={rid} due={due.strftime('%Y-%m-%dT%H:%M:%SZ')} -->\n")
    body = current if current.strip() else REMINDERS_HEADER
    if body and not body.endswith("\n"):
        body += "\n"
    store.write(REMINDERS, body + line, **write_kwargs(ctx, "reminders"))
    msg = ctx.turn.message
    # Ids only on the bus: the text stays in REMINDERS.md, where the person can read and edit it.
    payload = {"user_id": ctx.user_id, "reminder_id": rid, "channel": msg.channel,
               "conversation_id": msg.conversation_id or msg.account_id, "kind": msg.kind.value,
               "persona": ctx.turn.session.persona if ctx.turn.session else ""}
    await bus.enqueue(REMINDER_JOB, payload, job_id=f"reminder:{ctx.user_id}:{rid}",
                      delay=max(0.0, (due - now).total_seconds()))
    return f"Reminder {rid} set for {local:%A %Y-%m-%d %H:%M} ({tz_name})."


async def reminder_due(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Deliver one reminder to the conversation it was set in, then mark it sent.

    At-least-once: a retry after a failed send delivers it then; a reminder already marked sent or
    cancelled (by the tool or by hand) is skipped, so a redelivered job does not repeat it.
    """
    gateway: Gateway = ctx.gateway
    uid, rid = str(payload["user_id"]), str(payload["reminder_id"])
    store = gateway.memory_store(uid)
    text = store.read(REMINDERS) if store.exists(REMINDERS) else ""
    reminder = next((r for r in parse_reminders(text) if r.id == rid), None)
    if reminder is None or reminder.status != "pending":
        log.info("reminder %s of %s is %s; not delivered", rid, uid, reminder.status if reminder else "gone")
        return
    now = datetime.now(UTC)
    if reminder.due > now + timedelta(seconds=1):
        # Edited by hand to a later time: wait for it (same job id, so never two pending deliveries).
        await ctx.bus.enqueue(REMINDER_JOB, payload, job_id=f"reminder:{uid}:{rid}:{int(reminder.due.timestamp())}",
                              delay=(reminder.due - now).total_seconds())
        return
    address = ConversationAddress(channel=str(payload["channel"]), conversation_id=str(payload["conversation_id"]),
                                  kind=ConversationKind(payload.get("kind", "dm")), user_id=uid,
                                  persona=str(payload.get("persona") or gateway.config.personas.default))
    body = f"Reminder: {reminder.what}"
    chunks = tuple(split_text(body, gateway.message_limit(address.channel)))
    await gateway.send(address, Reply(text=body, chunks=chunks))
    sent = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    latest = store.read(REMINDERS) if store.exists(REMINDERS) else text
    new, changed = _set_mark(latest, rid, "x", f"sent={sent}")
    if changed:
        store.write(REMINDERS, new, source=f"job:{REMINDER_JOB}", message_id=ctx.job_id)


def _has_bus(gateway: Gateway) -> bool:
    return gateway.bus is not None


TOOL = Tool(
    name="reminders",
    description=("Reminders for the person: 'add' one (text, and 'at' as their local ISO date-time or "
                 "'in_minutes'); it is sent to this conversation when due. 'list' pending ones, 'cancel' by id."),
    input_schema={"type": "object", "properties": {
        "action": {"type": "string", "enum": ["add", "list", "cancel"]},
        "text": {"type": "string", "description": "what to remind them of (add)"},
        "at": {"type": "string", "description": "local date and time, e.g. 2026-05-10T09:00 (add)"},
        "in_minutes": {"type": "number", "description": "alternative to 'at': minutes from now (add)"},
        "id": {"type": "string", "description": "reminder id (cancel)"},
    }, "required": ["action"]},
    handler=reminders_tool, writes=True, available=_has_bus,
)
