"""The Gateway: lifecycle of state, plugins, HTTP server and adapters.

``async with Gateway(config) as gw:`` opens everything in order and closes it in reverse, even when
startup fails halfway. Adapters hand messages to ``gw.handle_inbound``; nothing else in the host
knows about channels or memory stages.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from adapters.base import Adapter
from gateway.config import Config, ConfigError
from gateway.dedupe import Dedupe
from gateway.hookcall import HookCaller
from gateway.identity import Identities
from gateway.llm.base import NO_MODEL_HELP, Provider
from gateway.llm.provider import NoModelProvider, make_provider
from gateway.logs import collect_secrets, install_redaction
from gateway.memory.store import MemoryStore
from gateway.plugins import PluginHost, build_plugin_host
from gateway.sessions import Sessions
from gateway.state import State, ts
from gateway.supervisor import Supervisor
from gateway.types import ConversationAddress, InboundMessage, Reply, Turn

log = logging.getLogger("kith.gateway")

DeltaCallback = Callable[[str], Awaitable[None] | None]
GATEWAY_KEY: web.AppKey[Gateway] = web.AppKey("gateway")


class Gateway:
    def __init__(
        self,
        config: Config,
        *,
        plugins: Sequence[Any] = (),
        entry_points: bool | None = None,
        serve_http: bool = True,
        supervise: bool = True,
    ) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir)
        self.plugin_host: PluginHost = build_plugin_host(config, extra_plugins=plugins, entry_points=entry_points)
        self.hooks = HookCaller(self.plugin_host.pm, timeout_s=config.plugins.hook_timeout_s)
        self.serve_http = serve_http
        self.supervise = supervise
        self.adapters: dict[str, Adapter] = {}
        self.supervisor = Supervisor()
        self.http_app = web.Application(client_max_size=1024 * 1024)
        self.http_app[GATEWAY_KEY] = self
        self.http_app.router.add_get("/healthz", self._healthz)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self._providers: dict[str, Provider] = {}
        self._stores: dict[str, MemoryStore] = {}
        self.started_at = time.time()
        self.state: State
        self.identities: Identities
        self.sessions: Sessions
        self.dedupe: Dedupe

    # ------------------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Gateway:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        install_redaction(collect_secrets(self.config))
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.plugin_host.pm.hook.gateway_configure.call_historic(kwargs={"config": self.config})
        self.state = State(self.data_dir / "state.sqlite")
        self.identities = Identities(self.state, self.config)
        self.identities.apply_config_links()
        self.sessions = Sessions(self.state, self.config)
        self.dedupe = Dedupe(self.state)
        self._providers["main"] = make_provider(self.config.llm)
        self._register_adapters()
        await self.hooks.call_all("gateway_startup", timeout=None, gateway=self)
        if self.serve_http:
            await self._start_http()
        if self.supervise:
            self.supervisor.start(self.adapters)
        log.info("kith started: %d adapters (%s), model: %s", len(self.adapters), ", ".join(self.adapters),
                 self.model_help if not self.model_ready else self.config.llm.provider)

    async def close(self) -> None:
        await self.supervisor.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if hasattr(self, "state"):
            await self.hooks.call_all("gateway_shutdown", timeout=None, gateway=self)
        for provider in self._providers.values():
            try:
                await provider.close()
            except Exception:
                log.exception("closing provider %s", provider.name)
        self._providers.clear()
        if hasattr(self, "state"):
            self.state.close()

    def _register_adapters(self) -> None:
        classes: dict[str, type[Adapter]] = {}
        problems: list[str] = []

        def register(cls: type[Adapter]) -> None:
            if cls.name in classes:
                problems.append(f"two plugins register an adapter named {cls.name!r}")
            classes[cls.name] = cls

        self.hooks.call_sync_all("gateway_register_adapters", register=register)
        if problems:
            raise ConfigError(problems, "adapters")
        for name, cls in classes.items():
            channel_cfg = getattr(self.config.channels, name, None)
            if channel_cfg is not None and not getattr(channel_cfg, "enabled", True):
                continue
            adapter = cls(self, channel_cfg)
            self.adapters[name] = adapter
            self.http_app.router.add_routes(adapter.routes())

    async def _start_http(self) -> None:
        self._runner = web.AppRunner(self.http_app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.server.host, self.config.server.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.config.server.port
        log.info("listening on http://%s:%s", self.config.server.host, self.port)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({
            "status": "ok",
            "uptime_s": round(time.time() - self.started_at, 1),
            "model": {"provider": self.llm().name, "ready": self.model_ready},
            "adapters": self.supervisor.health(),
            "plugin_failures": dict(self.hooks.failures),
        })

    # ---------------------------------------------------------------------------------- turns
    async def handle_inbound(self, message: InboundMessage, *, on_delta: DeltaCallback | None = None) -> Reply | None:
        """Run the turn protocol for one normalized message and return the reply (None = silent)."""
        from gateway.turn import ON_DELTA

        turn = Turn(turn_id=uuid.uuid4().hex, message=message, received_at=message.timestamp or datetime.now(UTC))
        if on_delta is not None:
            turn.stash[ON_DELTA] = on_delta
        result = await self.hooks.call_first("gateway_handle_turn", isolate=False, timeout=None,
                                             gateway=self, turn=turn)
        return result if isinstance(result, Reply) else None

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        """Deliver a message outside a turn (reminders, notices) through the owning adapter."""
        adapter = self.adapters.get(address.channel)
        if adapter is None:
            raise LookupError(f"no adapter {address.channel!r} is running")
        await adapter.send(address, reply)

    def remember_conversation(self, turn: Turn) -> None:
        """Keep enough about each conversation to reach it later (proactive messages)."""
        m = turn.message
        self.state.db.execute(
            "INSERT INTO conversations(conversation_key, channel, conversation_id, kind, user_id, persona,"
            " last_seen_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT(conversation_key) DO UPDATE SET"
            " user_id=excluded.user_id, last_seen_at=excluded.last_seen_at",
            (m.conversation_key, m.channel, m.conversation_id or m.account_id, m.kind.value,
             turn.user.user_id if turn.user else "", turn.session.persona if turn.session else "default", ts()),
        )

    async def merge_users(self, *, into: str, source: str) -> None:
        """Merge user ``source`` into ``into`` (link flow): plugins flush, the host moves, plugins reindex."""
        await self.hooks.call_all("gateway_before_users_merge", timeout=None, gateway=self, into=into, source=source)
        self.identities.merge(into=into, source=source)
        self._stores.pop(source, None)
        await self.hooks.call_all("gateway_users_merged", gateway=self, into=into, source=source)

    # ------------------------------------------------------------------------------- services
    def llm(self, role: str = "main") -> Provider:
        return self._providers.get(role) or self._providers.get("main") or NoModelProvider()

    @property
    def model_ready(self) -> bool:
        return not isinstance(self.llm(), NoModelProvider)

    @property
    def model_help(self) -> str:
        return NO_MODEL_HELP

    def message_limit(self, channel: str) -> int:
        adapter = self.adapters.get(channel)
        return adapter.max_message_chars if adapter else 4000

    def memory_store(self, user_id: str) -> MemoryStore:
        store = self._stores.get(user_id)
        if store is None:
            store = MemoryStore(self.data_dir / "users" / user_id, max_file_bytes=self.config.memory.max_file_bytes)
            self._stores[user_id] = store
        return store
