"""``/approve ID`` and ``/deny ID``: the person answers a tool call that waits for them (``gateway.approvals``).

Only the person the call was made for can answer it (another person's id is answered like an unknown
one), an expired one does nothing, and every answer is in the audit. ``/approve`` alone lists what
waits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.tools import approvals, deny, run_approved
from gateway.types import Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

HELP = {
    "approve": "/approve ID: let me do what I asked your approval for (/approve alone lists what waits)",
    "deny": "/deny ID: refuse it; nothing is done",
}


async def approval_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply:
    assert turn.user is not None
    approval_id = args.strip()
    if not approval_id:
        waiting = approvals(gateway).pending_for(turn.user.user_id)
        if not waiting:
            return Reply(text="Nothing waits for your approval.", notice=True)
        lines = [f"/approve {p.approval_id}: {p.summary}" for p in waiting]
        return Reply(text="Waiting for your approval:\n" + "\n".join(lines), notice=True)
    if command == "deny":
        return Reply(text=deny(gateway, turn, approval_id), notice=True)
    done, text = await run_approved(gateway, turn, approval_id)
    return Reply(text=text if done else f"Not done: {text}", notice=True)
