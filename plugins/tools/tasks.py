"""The ``tasks`` tool (tier 4, writes): the person's task list in ``TASKS.json``.

Format: ``{"tasks": [{"id", "text", "status": "open"|"done", "created", "done_at", "due"?, "alerted"?}]}``,
plain JSON a person can edit by hand; a file that does not parse is reported, never overwritten. An open
task with ``due`` (``2026-05-12``: 09:00 local that day; ``2026-05-12T17:00``: local) alerts the person
once when due (``gateway.schedule``: the alert time is recorded as ``alerted``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gateway.memory.files.errors import MemoryFileNotFoundError
from gateway.schedule import engine
from gateway.schedule.items import task_due
from gateway.schedule.zones import zone
from gateway.tools import Tool, ToolContext, ToolError
from plugins.tools.common import str_arg, write_kwargs

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore

TASKS = "TASKS.json"


def load_tasks(store: MemoryStore) -> list[dict[str, Any]]:
    """``TASKS.json``: ``{"tasks": [{"id", "text", "status": "open"|"done", "created", "done_at"}]}``."""
    try:
        raw = store.read(TASKS)
    except MemoryFileNotFoundError:
        return []
    if not raw.strip():
        return []
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ToolError(f"{TASKS} is not valid JSON ({exc}); fix or clear it by hand") from None
    tasks = data.get("tasks") if isinstance(data, dict) else data
    if not isinstance(tasks, list):
        raise ToolError(f"{TASKS} has no task list")
    return [t for t in tasks if isinstance(t, dict)]


def render_tasks(tasks: list[dict[str, Any]], *, limit: int = 50) -> str:
    open_tasks = [t for t in tasks if t.get("status") != "done"]
    done = len(tasks) - len(open_tasks)
    lines = [f"- [{t.get('id', '?')}] {t.get('text', '')}" + (f" (due {t['due']})" if t.get("due") else "")
             for t in open_tasks[:limit]]
    if len(open_tasks) > limit:
        lines.append(f"... and {len(open_tasks) - limit} more open tasks")
    head = f"{len(open_tasks)} open, {done} done" if tasks else "no tasks"
    return "\n".join([head, *lines])


async def tasks_tool(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    action = str_arg(args, "action", required=True)
    store = ctx.store
    tasks = load_tasks(store)
    if action == "list":
        return render_tasks(tasks)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    if action == "add":
        text = str_arg(args, "text", required=True, max_len=1000)
        due = str_arg(args, "due", max_len=40)
        ids = {str(t.get("id")) for t in tasks}
        n = len(tasks) + 1
        while f"t{n}" in ids:
            n += 1
        task = {"id": f"t{n}", "text": text, "status": "open", "created": now}
        when = ""
        if due:
            user = ctx.turn.user
            tz = zone(user.timezone if user else "UTC")
            try:
                when = f"; I will remind them {task_due(due, tz).astimezone(tz):%A %Y-%m-%d %H:%M} ({tz.key})"
            except ValueError:
                raise ToolError(f"'due' must be a date (2026-05-12) or local date and time (2026-05-12T17:00), "
                                f"got {due!r}") from None
            task["due"] = due
        tasks.append(task)
        _save_tasks(ctx, tasks)
        if due and ctx.gateway.bus is not None:
            await engine.sync_user(ctx.gateway, ctx.user_id, (TASKS,))
        return f"Added task t{n}{when}."
    if action in ("complete", "reopen"):
        tid = str_arg(args, "id", required=True, max_len=40)
        for t in tasks:
            if str(t.get("id")) == tid:
                if action == "complete":
                    t["status"], t["done_at"] = "done", now
                else:
                    t["status"] = "open"
                    t.pop("done_at", None)
                _save_tasks(ctx, tasks)
                return f"Task {tid} {'completed' if action == 'complete' else 'reopened'}."
        raise ToolError(f"no task {tid!r}; open tasks: {render_tasks(tasks)}")
    raise ToolError("'action' must be one of list, add, complete, reopen")


def _save_tasks(ctx: ToolContext, tasks: list[dict[str, Any]]) -> None:
    text = json.dumps({"tasks": tasks}, ensure_ascii=False, indent=2) + "\n"
    ctx.store.write(TASKS, text, **write_kwargs(ctx, "tasks"))


TOOL = Tool(
    name="tasks",
    description=("The person's task list (TASKS.json): list, add (text, optional due: alerts them once when due), "
                 "complete or reopen by id."),
    input_schema={"type": "object", "properties": {
        "action": {"type": "string", "enum": ["list", "add", "complete", "reopen"]},
        "text": {"type": "string"},
        "due": {"type": "string", "description": "optional due date (2026-05-12, alerts at 09:00) or local date and "
                "time (2026-05-12T17:00); the person is alerted once when it is due"},
        "id": {"type": "string", "description": "task id, e.g. t3 (complete, reopen)"},
    }, "required": ["action"]},
    handler=tasks_tool, writes=True,
)
