"""A minimal host for adapter unit tests: records inbound messages and answers with an echo.

Used only to test an adapter against its platform fake in isolation (parsing, signing, splitting,
retries). Everything that involves the turn pipeline runs through the real ``Gateway`` instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from gateway.config import Config, parse_config
from gateway.types import InboundMessage, Reply


@dataclass
class StubGateway:
    config: Config
    inbound: list[InboundMessage] = field(default_factory=list)
    answer: Any = None  # callable(message) -> str | None; default echoes
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    def with_channels(cls, tmp_path: Any, **channels: Any) -> StubGateway:
        return cls(parse_config({"data_dir": str(tmp_path), "channels": channels}, env={}))

    async def handle_inbound(self, message: InboundMessage, *, on_delta: Any = None) -> Reply | None:
        self.inbound.append(message)
        self.arrived.set()
        text = self.answer(message) if self.answer else f"echo: {message.text}"
        if text is None:
            return None
        return Reply(text=text)

    async def wait_inbound(self, count: int, timeout: float = 10.0) -> list[InboundMessage]:
        async def until() -> None:
            while len(self.inbound) < count:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(until(), timeout)
        return self.inbound
