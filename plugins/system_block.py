"""Built-in plugin: the per-request system block (current date/time, and the mode when OTR).

The date line is always present so the model can reason about "yesterday" and "next Friday" in the
user's own timezone; the mode line appears only when something non-default (Off-The-Record) is on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from gateway.hookspecs import hookimpl
from gateway.types import ContextSection, Stability, Turn

if TYPE_CHECKING:
    from gateway.services import Services

OTR_LINE = (
    "Current mode: Off-The-Record. This conversation is private: it will not be logged, indexed "
    "or used for memory. Do not promise to remember it."
)


def system_block(turn: Turn, now: datetime | None = None) -> str:
    tz_name = turn.user.timezone if turn.user else "UTC"
    try:
        tz = ZoneInfo(tz_name)
    except Exception:
        tz = ZoneInfo("UTC")
    local = (now or datetime.now(UTC)).astimezone(tz)
    lines = [f"Current date and time: {local:%A, %Y-%m-%d at %H:%M} ({tz_name})"]
    if turn.otr:
        lines.append(OTR_LINE)
    return "\n".join(lines)


@hookimpl
def gateway_context_sections(gateway: Services, turn: Turn) -> list[ContextSection]:
    return [
        ContextSection(
            source="system", title="System", text=system_block(turn), priority=1000,
            stability=Stability.VOLATILE, protected=True,
        )
    ]
