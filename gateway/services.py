"""What a module may ask of the running gateway: the ``Services`` Protocol, which ``gateway.app.Gateway``
implements.

Modules that are handed the gateway (hooks, stages, tools, jobs, routes, adapters) type it as
``Services``, never as ``Gateway``: ``gateway/app.py`` imports most of the house to assemble it, so a
module naming ``Gateway`` sits in one import cycle with everything ``app.py`` imports (79 modules
before issue 29). This Protocol names only what lies below it: the config, the state, the stores and
services the gateway opens, and ``Hooks`` (which types its own ``gateway`` arguments against this
Protocol, a cycle of two). What plugins register (tools, routes, commands) is above it, so it is reached
through the stash (``gateway.tools.TOOLS``, ``COMMANDS``, ``ROUTES``). tests/core/test_import_cycles.py keeps
the cycles small.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from gateway.adapter import Adapter
    from gateway.bus.bus import JobBus
    from gateway.cluster.role import Cluster
    from gateway.config import Config, LLMConfig
    from gateway.hooks import Hooks
    from gateway.identity.users import Identities
    from gateway.llm.base import Provider
    from gateway.memory.files.store import MemoryStore
    from gateway.memory.knowledge.graph import KnowledgeGraph
    from gateway.memory.search.service import MemoryService
    from gateway.state import State
    from gateway.turn.dedupe import Dedupe
    from gateway.turn.sessions import Sessions
    from gateway.types import ConversationAddress, InboundMessage, Reply, Stash, Turn

DeltaCallback = Callable[[str], Awaitable[None] | None]


class Services(Protocol):
    """The running gateway, as the modules it is handed to see it (``gateway.app.Gateway``)."""

    config: Config
    data_dir: Path
    mode: Literal["daemon", "worker"]
    run_jobs: bool  # False in read-only CLI commands and in ``kith worker``
    port: int | None  # the HTTP port once serving
    started_at: float
    stash: Stash  # per-gateway state of plugins, under typed keys
    hooks: Hooks
    state: State
    identities: Identities
    sessions: Sessions
    dedupe: Dedupe
    memory: MemoryService | None  # None until started, and after close
    kg: KnowledgeGraph | None
    bus: JobBus | None
    cluster: Cluster

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        """The running channels by name (read-only to modules: the gateway creates them)."""
        ...

    async def handle_inbound(self, message: InboundMessage, *, on_delta: DeltaCallback | None = None,
                             stop: asyncio.Event | None = None) -> Reply | None:  # fmt: skip
        """Run the turn protocol for one normalized message (None = silent); setting ``stop`` ends the
        model call with what was shown so far (gateway/turn/stop.py)."""
        ...

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        """Deliver a message outside a turn through the owning adapter."""
        ...

    def remember_conversation(self, turn: Turn) -> None: ...

    async def merge_users(self, *, into: str, source: str) -> None: ...

    def llm(self, role: str = "main") -> Provider:
        """The provider behind ``role`` (its name, readiness); calls go through ``model(role)``."""
        ...

    def model(self, role: str = "main", user_id: str = "") -> Provider:
        """The model for ``role`` through ``gateway_llm_call`` (``gateway.llm.routed.RoutedModel``)."""
        ...

    def replace_llm(self, llm: LLMConfig) -> None:
        """Run with another ``llm`` section from now on (the browser's model set-up), no restart."""
        ...

    @property
    def model_ready(self) -> bool: ...

    @property
    def model_help(self) -> str: ...

    def message_limit(self, channel: str) -> int: ...

    def memory_store(self, user_id: str) -> MemoryStore: ...

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str = "") -> asyncio.Task[Any]: ...

    async def settle(self, timeout: float = 30.0) -> None: ...
