"""A stand-in host that streams: what the streaming tests of each adapter share."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from gateway.types import InboundMessage, Reply
from tests.channels.stub import StubGateway

# The stream tests' throttle (``stream_interval_s``) and what the gaps between edits may be.
INTERVAL = 0.05
SLACK = 0.025  # the retry-after checks: a wait of its own, not the throttle's interval
# The throttle schedules its next call ``interval_s`` after the previous call's answer came back, and
# that call had arrived at the fake (which stamps arrivals with time.monotonic) before its answer
# left: two arrivals are INTERVAL apart or more by construction, load only makes gaps longer (asyncio
# timers never fire before their time, to the monotonic clock's 1 ns resolution). The 2% only absorbs
# float rounding; at twice the rate gaps are INTERVAL/2 plus a localhost round trip, and this fails.
MIN_GAP = 0.98 * INTERVAL


@dataclass
class StreamingStub(StubGateway):
    """Answers every message with ``script`` fed piece by piece to ``on_delta``, ``gap`` seconds apart."""

    script: list[str] = field(default_factory=list)
    gap: float = 0.004
    final: str | None = None  # the reply the turn returns (default: the streamed text)
    notice: bool = False  # the reply is a host notice (a command's answer), not the model's

    async def handle_inbound(self, message: InboundMessage, *, on_delta: Any = None) -> Reply | None:
        self.inbound.append(message)
        for piece in self.script:
            if on_delta is not None:
                result = on_delta(piece)
                if asyncio.iscoroutine(result):
                    await result
            await asyncio.sleep(self.gap)
        return Reply(text=self.final if self.final is not None else "".join(self.script), notice=self.notice)


def words(n: int, width: int = 7) -> list[str]:
    return [f"w{i:0{width - 2}d} " for i in range(n)]




def show(events: list[Any], start: float) -> str:
    """The platform's view of a streamed reply, one call a line, for a person to read (and a report)."""
    lines = []
    for e in events:
        text = getattr(e, "text", None)
        text = getattr(e, "content", "") if text is None else text
        mid = getattr(e, "message_id", "")
        text = text if len(text) <= 70 else f"{text[:30]}…{text[-30:]} ({len(text)} chars)"
        lines.append(f"+{e.at - start:6.3f}s {e.method:<17} msg {str(mid)[-4:]:<4} {text!r}")
    return "\n".join(lines)


async def counted_streamed(adapter: Any, expected: int = 1, timeout: float = 10.0) -> None:
    """Wait (bounded) until the adapter has counted ``expected`` streamed replies. The platform fake
    records the last edit when its request arrives; the adapter counts the reply as streamed only after
    that edit's answer is back, so a test that read the counter at once raced it (and lost under load)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while adapter.stats["streamed"] != expected:
        if loop.time() > deadline:
            raise AssertionError(f"streamed replies: {adapter.stats['streamed']}, expected {expected}")
        await asyncio.sleep(0.02)
