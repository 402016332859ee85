"""The Gateway: lifecycle of state, plugins, HTTP server and adapters.

``async with Gateway(config) as gw:`` opens everything in order and closes it in reverse, even when
startup fails halfway. Adapters hand messages to ``gw.handle_inbound``; nothing else in the host
knows about channels or memory stages.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from gateway.adapter import Adapter
from gateway.bus import JobBus, UserDirectory
from gateway.cluster.node import node_dir
from gateway.cluster.role import Cluster
from gateway.config import Config, LLMConfig
from gateway.hooks import Hooks
from gateway.http.accept import BackoffSite
from gateway.http.api.table import install as install_api
from gateway.http.api.table import mount as mount_api
from gateway.http.guard import install as install_http_guard
from gateway.http.signin import install as install_signin
from gateway.identity.users import Identities
from gateway.llm import health as model_health
from gateway.llm import setup as model_setup
from gateway.llm.base import NO_MODEL_HELP, Provider
from gateway.llm.provider import NO_MODEL_WARNED, NoModelProvider, make_providers
from gateway.llm.routed import RoutedModel
from gateway.logs import TURN_ID, collect_secrets, install_redaction
from gateway.mcp import MANAGER as MCP_MANAGER
from gateway.memory.files.store import MemoryStore
from gateway.memory.knowledge.graph import KnowledgeGraph
from gateway.memory.search.service import MemoryService
from gateway.ops.http import routes as metrics_routes
from gateway.ops.metrics import OUTCOME as TURN_OUTCOME
from gateway.ops.metrics import observe_turn
from gateway.plugins import PluginHost, build_plugin_host, indexes_live, uses_index_every_turn
from gateway.registrations import Registrations, collect_registrations
from gateway.state import State, open_configured_async
from gateway.supervisor import Supervisor
from gateway.turn.dedupe import Dedupe
from gateway.turn.gate import TURNS
from gateway.turn.sessions import Sessions
from gateway.turn.spool import TurnSpool
from gateway.turn.writeback import WRITE_BACK, WriteBack
from gateway.types import ConversationAddress, InboundMessage, Reply, Stash, Turn
from gateway.util.diskspace import MB

log = logging.getLogger("kith.gateway")

# ``background_load`` (``kith run``): the embedder and the index start loading once the first turn is
# answered, or this long after the gateway began serving. Loading holds the GIL for most of a second;
# the start and the first reply should not share the CPU with it (docs/memory.md, "Start-up").
LOAD_AFTER_S = 1.0

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
        mode: Literal["daemon", "worker"] = "daemon",
        run_jobs: bool = True,
        background_load: bool = False,
    ) -> None:
        """``mode="worker"`` (``kith worker``): attach to the daemon's bus instead of owning it, run no
        scheduler, and share the memory index through the bus when the daemon holds it.
        ``run_jobs=False`` (read-only CLI commands): no workers, no scheduler, no startup jobs.
        ``background_load=True`` (``kith run``): the embedder and the memory index load while the
        gateway already answers; turns until then go without recall (docs/memory.md, "Start-up")."""
        self.config = config
        self.mode = mode
        self.run_jobs = run_jobs and mode == "daemon"
        self.data_dir = Path(config.data_dir)
        self.plugin_host: PluginHost = build_plugin_host(config, extra_plugins=plugins, entry_points=entry_points)
        self.hooks: Hooks = self.plugin_host.hooks
        self.serve_http = serve_http
        self.background_load = background_load
        self.supervise = supervise
        self.adapters: dict[str, Adapter] = {}
        self.supervisor = Supervisor()
        self.http_app = web.Application(client_max_size=1024 * 1024)
        self.http_app[GATEWAY_KEY] = self
        install_http_guard(self.http_app, self)  # Host, proxy, Origin and content-type checks on every route
        install_signin(self.http_app, self)  # session cookie, sign-in routes, CSRF token (gateway/http/signin.py)
        self.http_app.router.add_get("/healthz", self._healthz)
        self.http_app.router.add_routes(metrics_routes(self))  # /metrics (Prometheus; gateway/ops/http.py)
        install_api(self.http_app)  # /api errors as JSON; its routes are mounted in start() (docs/api.md)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self._providers: dict[str, Provider] = {}
        self._retired_providers: list[Provider] = []  # replaced by replace_llm, closed at shutdown
        self.started_at = time.time()
        self._background: set[asyncio.Task[Any]] = set()
        self._load_timer: asyncio.TimerHandle | None = None  # background_load: begins the memory's load
        # Per-gateway state of plugins (modules), under typed keys (``gateway.stash[KEY]``): two
        # gateways in one process (tests, kith worker next to a daemon) never share it.
        self.stash = Stash()
        self._bus_tasks: list[asyncio.Task[None]] = []
        self._scheduler: asyncio.Task[None] | None = None  # the cron scheduler, while this node leads
        self.memory: MemoryService | None = None
        self.bus: JobBus | None = None
        self.kg: KnowledgeGraph | None = None
        # This node's part in a cluster: the scheduler lease (on_leader), cross-node locks (gateway/cluster).
        self.cluster = Cluster(config)
        self.registrations: Registrations  # collected in start()
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
        self.hooks.configure(self.config)
        # Adapters, jobs and tools from every plugin, before anything is opened: every problem
        # (a name registered twice, a bad spec) refuses startup in one error.
        self.registrations = collect_registrations(self.hooks, self.config)
        self.registrations.share(self.stash)
        # /api: the host's table and every plugin's routes, as registered (gateway/http/api/registry.py)
        mount_api(self.http_app, self, self.registrations.routes.values())
        # Opened in a worker thread: the WAL switch and migrations may wait for another process.
        url = self.config.state.url  # unset: <data_dir>/state.sqlite; postgresql://... (docs/configuration.md)
        self.state = await open_configured_async(self.data_dir, url and url.get_secret_value(),
                                                 pool_size=self.config.state.pool_size)  # fmt: skip
        self.identities = Identities(self.state, self.config)
        self.identities.apply_config_links()
        self.sessions = Sessions(self.state, self.config)
        self.dedupe = Dedupe(self.state)
        if self.run_jobs:
            # Before the plugins start: the session log's catch-up then finds what an earlier run
            # spooled (gateway/turn/writeback.py). The gateway that answers turns holds the spool.
            # In a cluster each node has its own (under its node directory: keep cluster.node_id stable).
            spool = TurnSpool(node_dir(self.config), self.config.state.spool_mb * MB)
            keeper = self.stash[WRITE_BACK] = WriteBack(self, spool)
            keeper.start()
            keeper.serve()
        stored_model = model_setup.load(self.config)  # set up in the browser, while config.yaml names none
        if stored_model is not None:
            self.config.llm = stored_model
        self._providers.update(make_providers(self.config.llm))
        self.kg = KnowledgeGraph(self.state)  # on the state's one connection
        self.memory = MemoryService(
            self.config, detach_if_busy=self.mode == "worker", live_indexing=indexes_live(self.config.plugins),
            every_turn=uses_index_every_turn(self.config.plugins),
        )
        await self.memory.start(background=self.background_load)
        self._create_adapters()
        self.bus = JobBus(
            self.config, self.registrations.jobs.specs, ctx_factory=lambda: self,
            users_provider=self._cron_users, own_server=self.mode == "daemon",
        )
        await self.bus.start()
        await self.cluster.start(self.bus.redis, lead=self.run_jobs)
        await self.hooks.startup(self)
        if self.run_jobs:
            if self.config.bus.workers_in_process:
                self._bus_tasks.append(asyncio.create_task(self.bus.run_workers(), name="bus:workers"))
            self.cluster.on_leader(self._start_scheduler, self._stop_scheduler)  # cron: one node at a time
        if self.serve_http:
            await self._start_http()
        if self.supervise:
            self.supervisor.start(self.adapters)
        if self.memory is not None and self.background_load:
            self._load_timer = asyncio.get_running_loop().call_later(LOAD_AFTER_S, self._begin_loading)
        log.info("kith started: %d adapters (%s), model: %s", len(self.adapters), ", ".join(self.adapters),
                 self.model_help if not self.model_ready else self.config.llm.provider)

    async def close(self) -> None:
        if self._load_timer is not None:
            self._load_timer.cancel()
            self._load_timer = None
        if self.memory is not None:
            self.memory.loader.abandon_load()  # index jobs waiting for a load that never began: the bus drains them
        await self.supervisor.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.cluster.close()  # leader work stops, the lease goes to the next node at once
        if hasattr(self, "state"):
            await self.hooks.shutdown(self)
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        keeper = self.stash.pop(WRITE_BACK)
        if keeper is not None:
            await keeper.close()
        if self.bus is not None:
            await self.bus.close()  # stops the scheduler and drains running jobs first
            self.bus = None
        for task in self._bus_tasks:
            try:
                await task
            except Exception:
                log.exception("job bus task %s ended with an error", task.get_name())
        self._bus_tasks.clear()
        if self.memory is not None:
            await self.memory.close()
            self.memory = None
        if self.kg is not None:
            self.kg.close()
            self.kg = None
        for provider in (*self._providers.values(), *self._retired_providers):
            try:
                await provider.close()
            except Exception:
                log.exception("closing provider %s", provider.name)
        self._providers.clear()
        self._retired_providers.clear()
        if hasattr(self, "state"):
            self.state.close()

    def _begin_loading(self) -> None:
        """The embedder and the index start loading (``background_load``): after the first turn is
        answered, or ``LOAD_AFTER_S`` after the gateway began serving, whichever comes first."""
        if self._load_timer is not None:
            self._load_timer.cancel()
            self._load_timer = None
            if self.memory is not None:
                self.memory.loader.begin_loading()

    def _create_adapters(self) -> None:
        """One adapter per registered class whose channel is enabled; its webhook routes are mounted."""
        for name, cls in self.registrations.adapters.items():
            channel_cfg = self.config.channels.get(name)  # None: a channel without a config section
            if channel_cfg is not None and not channel_cfg.enabled:
                continue
            adapter = cls(self, channel_cfg)
            self.adapters[name] = adapter
            self.http_app.router.add_routes(adapter.routes())

    async def _start_http(self) -> None:
        self._runner = web.AppRunner(self.http_app, access_log=None, handle_signals=False)
        await self._runner.setup()
        # BackoffSite: accepting pauses (and logs once) when descriptors run out (gateway/http/accept.py)
        site = BackoffSite(self._runner, self.config.server.host, self.config.server.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.config.server.port
        log.info("listening on http://%s:%s", self.config.server.host, self.port)

    async def _healthz(self, request: web.Request) -> web.Response:
        from gateway.ops.memory_jobs import health_of_memory_jobs
        from gateway.turn.writefailures import write_failures

        # "degraded": the daemon answers, but something is not at full service (indexing paused
        # for lack of disk space, turns answered but not stored); each reason is one line.
        problems = self.memory.health_problems() if self.memory is not None else []
        persist = write_failures(self.stash).problem()
        if persist:
            problems.append(persist)
        keeper = self.stash.get(WRITE_BACK)
        spooled = keeper.problem() if keeper is not None else None
        if spooled:
            problems.append(spooled)
        mcp = self.stash.get(MCP_MANAGER)  # MCP servers not up: their tools are withdrawn (docs/mcp.md)
        if mcp is not None:
            problems.extend(mcp.problems())
        failing, model_problems = model_health.report(self.stash)  # a model that keeps failing
        problems.extend(model_problems)
        memory_jobs = await health_of_memory_jobs(self)  # dead-lettered, failing again and again
        problems.extend(memory_jobs.pop("problems", []))
        return web.json_response({
            "status": "degraded" if problems else "ok",
            "degraded": problems,
            "uptime_s": round(time.time() - self.started_at, 1),
            "model": {"provider": self.llm().name, "ready": self.model_ready, "failing": failing},
            "adapters": self.supervisor.health(),
            "plugin_failures": dict(self.hooks.failures),
            "mcp": mcp.health() if mcp is not None else {},
            "memory_jobs": memory_jobs,
        })

    # ---------------------------------------------------------------------------------- turns
    async def handle_inbound(self, message: InboundMessage, *, on_delta: DeltaCallback | None = None,
                             stop: asyncio.Event | None = None) -> Reply | None:  # fmt: skip
        """Run the turn protocol for one normalized message and return the reply (None = silent);
        setting ``stop`` ends the model call with what was shown so far (gateway/turn/stop.py).

        The turn runs in a task of the gateway's, so an adapter restart that cancels the caller does
        not cut it off: it completes, and its reply is delivered after the restart (None to a caller
        still waiting then; gateway/turn/inflight.py)."""
        turn = Turn(turn_id=uuid.uuid4().hex, message=message, received_at=message.timestamp or datetime.now(UTC))

        async def work(relay: DeltaCallback | None) -> Reply | None:
            return await self._run_turn(turn, on_delta=relay, stop=stop)

        return await self.supervisor.turns.run(self, turn, work, on_delta)

    async def _run_turn(self, turn: Turn, *, on_delta: DeltaCallback | None,
                        stop: asyncio.Event | None) -> Reply | None:  # fmt: skip
        from gateway.turn.protocol import ON_DELTA
        from gateway.turn.stop import STOP

        message = turn.message
        if on_delta is not None:
            turn.stash[ON_DELTA] = on_delta
        if stop is not None:
            turn.stash[STOP] = stop
        # Every log line of this turn carries its id (JSON logs, gateway/logs.py); counted for /metrics.
        token = TURN_ID.set(turn.turn_id)
        started = time.perf_counter()
        outcome = "error"
        try:
            with TURNS.turn():  # background embedding waits meanwhile (gateway/turn/gate.py)
                reply = await self.hooks.handle_turn(self, turn)
            outcome = turn.stash.get(TURN_OUTCOME) or (
                "dropped" if reply is None else "notice" if reply.notice else "replied")
            return reply
        finally:
            observe_turn(message.channel, outcome, time.perf_counter() - started)
            TURN_ID.reset(token)
            if self._load_timer is not None:  # the first turn since start is answered
                self._begin_loading()

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        """Deliver a message outside a turn (reminders, notices) through the owning adapter."""
        adapter = self.adapters.get(address.channel)
        if adapter is None:
            raise LookupError(f"no adapter {address.channel!r} is running")
        await adapter.send(address, reply)

    def remember_conversation(self, turn: Turn) -> None:
        """Keep enough about each conversation to reach it later (proactive messages)."""
        m = turn.message
        self.state.conversations.remember(
            conversation_key=m.conversation_key, channel=m.channel, conversation_id=m.conversation_id or m.account_id,
            kind=m.kind.value, user_id=turn.user.user_id if turn.user else "",
            persona=turn.session.persona if turn.session else "default",
        )

    async def merge_users(self, *, into: str, source: str) -> None:
        """Merge user ``source`` into ``into`` (link flow): plugins flush, the host moves, plugins reindex."""
        await self.hooks.before_users_merge(self, into=into, source=source)
        self.identities.merge(into=into, source=source)
        await self.hooks.users_merged(self, into=into, source=source)

    # ------------------------------------------------------------------------------- services
    def llm(self, role: str = "main") -> Provider:
        """The provider behind ``role`` (its name, readiness). Calls go through ``model(role)``."""
        return self._providers.get(role) or self._providers.get("main") or NoModelProvider()

    def model(self, role: str = "main", user_id: str = "") -> RoutedModel:
        """The model for ``role`` through ``gateway_llm_call``: the path every call takes, background
        jobs included, so plugins overriding the hook see them all. ``user_id``: the person a
        background job works for (usage is counted to them; their daily budget stops the job)."""
        return RoutedModel(self, role, user_id)

    def replace_llm(self, llm: LLMConfig) -> None:
        """Run with another ``llm`` section from now on, without a restart (the browser's model set-up,
        ``gateway.llm.setup``): every role's provider is rebuilt. A call already under way finishes on
        the provider it started with; the replaced providers are closed at shutdown."""
        self._retired_providers.extend(self._providers.values())
        self.config.llm = llm
        self._providers.clear()
        self._providers.update(make_providers(llm))
        self.stash.pop(NO_MODEL_WARNED, None)

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
        """The user's guarded store; every write through it is re-indexed (through the bus)."""
        return self._memory().stores.for_user(user_id)

    def _memory(self) -> MemoryService:
        if self.memory is None:
            raise RuntimeError("the gateway is not started")
        return self.memory

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str = "") -> asyncio.Task[Any]:
        """Run a short background coroutine the gateway waits for on ``settle()`` and shutdown."""
        task = asyncio.create_task(coro, name=name or None)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def settle(self, timeout: float = 30.0) -> None:
        """Wait until buffered writes, queued re-indexes and every queued (not delayed) job are done.

        Tests and benchmarks use it to observe the effects of background work deterministically.
        """
        from gateway.bus.status import queue_busy  # here: only tests and benchmarks settle

        deadline = time.monotonic() + timeout
        quiet = 0
        while quiet < 2:  # two quiet polls in a row: a finishing job may enqueue a follow-up
            await self.hooks.flush(self)
            found = bool(self._background)
            if self._background:
                await asyncio.gather(*list(self._background), return_exceptions=True)
            if self.memory is not None and not self.memory.detached:
                await self.memory.indexing.drain()
            busy = self.bus is not None and await queue_busy(self.bus.redis, self.bus.keys, self.bus.specs)
            quiet = 0 if busy or self._background else quiet + 1
            if time.monotonic() > deadline:
                raise TimeoutError("background work did not settle")
            # A round that found work waits a little before the next, and a poll is one round trip:
            # polling back to back with a full queue status each time took most of the loop's core
            # from the work being waited for (22 s of CPU to settle a 1,000-turn bench, now ~6).
            await asyncio.sleep(0.02 if busy else 0.005 if found or self._background else 0)

    def _start_scheduler(self) -> None:
        if self.bus is not None and (self._scheduler is None or self._scheduler.done()):
            self._scheduler = asyncio.create_task(self.bus.run_scheduler(), name="bus:scheduler")

    async def _stop_scheduler(self) -> None:
        task, self._scheduler = self._scheduler, None
        if task is None:
            return
        if self.bus is not None and self.bus.scheduler is not None:
            await self.bus.stop_scheduler()
        task.cancel()  # not started yet, or already stopped: cancelling is harmless
        await asyncio.gather(task, return_exceptions=True)

    def _cron_users(self) -> UserDirectory:
        """Users for cron jobs that fire per user: the State, read by timezone and a page at a time,
        so a scheduler tick costs what is due, not what is stored (gateway/bus/cronusers.py). A user
        whose timezone is empty or unknown runs in ``config.timezone`` (the scheduler's default)."""
        return self.state.users
