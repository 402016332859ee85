"""Built-in plugin: the per-request system block (current date/time, and the mode when OTR).

The date line is present so the model can reason about "yesterday" and "next Friday" in the user's
own timezone, unless the speaking persona has ``personas.inject_datetime: {<name>: false}`` (seed 000:
a persona that must not see the date); the mode line appears only when something non-default
(Off-The-Record) is on. With neither, there is no system block at all.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from gateway.hookspecs import hookimpl
from gateway.personas.choice import turn_persona
from gateway.types import ContextSection, Stability, Turn

if TYPE_CHECKING:
    from gateway.services import Services

OTR_LINE = (
    "Current mode: Off-The-Record. This conversation is private: it will not be logged, indexed "
    "or used for memory. Do not promise to remember it."
)


def system_block(turn: Turn, now: datetime | None = None, *, datetime_line: bool = True) -> str:
    lines = [date_line(turn, now)] if datetime_line else []
    if turn.otr:
        lines.append(OTR_LINE)
    return "\n".join(lines)


def date_line(turn: Turn, now: datetime | None = None) -> str:
    tz_name = turn.user.timezone if turn.user else "UTC"
    try:
        tz = ZoneInfo(tz_name)
    except Exception:
        tz = ZoneInfo("UTC")
    local = (now or datetime.now(UTC)).astimezone(tz)
    return f"Current date and time: {local:%A, %Y-%m-%d at %H:%M} ({tz_name})"


@hookimpl
def gateway_context_sections(gateway: Services, turn: Turn) -> list[ContextSection]:
    wanted = gateway.config.personas.inject_datetime
    datetime_line = not wanted or wanted.get(turn_persona(gateway, turn), True)
    text = system_block(turn, datetime_line=datetime_line)
    if not text:
        return []
    return [
        ContextSection(
            source="system", title="System", text=text, priority=1000,
            stability=Stability.VOLATILE, protected=True,
        )
    ]
