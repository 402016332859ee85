"""``/approve ID`` and ``/deny ID``: the person answers a tool call that waits for them (``gateway.approvals``).

Only the person the call was made for can answer it (another person's id is answered like an unknown
one), an expired one does nothing, and every answer is in the audit. ``/approve`` alone lists what
waits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.approvals import always_allowed, set_always
from gateway.tools import approvals, deny, run_approved
from gateway.types import Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

HELP = {
    "approve": ("/approve ID: let me do what I asked your approval for (/approve alone lists what waits; "
                "/approve ID always: and never ask for that tool again; /approve never TOOL: ask again)"),
    "deny": "/deny ID: refuse it; nothing is done",
}


async def approval_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply:
    assert turn.user is not None
    words = args.split()
    mine = always_allowed(gateway.config.data_dir, turn.user.user_id)
    if not words:
        waiting = approvals(gateway).pending_for(turn.user.user_id)
        lines = [f"/approve {p.approval_id}: {p.summary}" for p in waiting]
        text = "Waiting for your approval:\n" + "\n".join(lines) if lines else "Nothing waits for your approval."
        if command == "approve" and mine:
            text += f"\nAlways allowed for you: {', '.join(sorted(mine))} (/approve never TOOL asks again)"
        return Reply(text=text, notice=True)
    if command == "approve" and words[0] == "never":
        tool = words[1] if len(words) > 1 else ""
        if set_always(gateway.config.data_dir, turn.user.user_id, tool, False):
            return Reply(text=f"{tool} asks for your approval again.", notice=True)
        return Reply(text=f"{tool or 'That tool'} was not always allowed.", notice=True)
    approval_id = words[0]
    if command == "deny":
        return Reply(text=deny(gateway, turn, approval_id), notice=True)
    always = words[1:] == ["always"]
    done, text = await run_approved(gateway, turn, approval_id, always=always)
    if done and always:
        text += "\n(Always allowed from now on; /approve never TOOL asks again.)"
    return Reply(text=text if done else f"Not done: {text}", notice=True)
