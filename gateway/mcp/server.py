"""One configured MCP server: its connection, its current tools, and its restarts.

The connection lives in one task (the SDK's client is an anyio context that must be entered and left
in the same task): connect, list the tools, then ping every ``mcp.ping_interval_s`` and re-list when
the server says its list changed. A ping that fails, a call that finds the connection gone, or a
connection that ends takes the server down: its tools stop being offered at once (``up``) and the
task connects again after a capped, jittered exponential backoff (``gateway.supervisor.Backoff``),
reset after a connection that stayed up ``HEALTHY_AFTER_S``. The daemon never stops for a server.

Secrets (``env``, ``headers``) are handed to the SDK only; what is logged is the server's name, its
state and the error's type and text, never a command line or a header.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from gateway.mcp.convert import RemoteTool, convert, quoted, result_text
from gateway.mcp.settings import McpConfig, McpServerConfig
from gateway.supervisor import Backoff
from gateway.tools import ToolError

log = logging.getLogger("kith.mcp")

HEALTHY_AFTER_S = 30.0
STOP_WAIT_S = 7.0  # for the connection's task to end at shutdown: the SDK may take 6.5 s to end a stdio child
MAX_LIST_PAGES = 20  # a paginator that never ends cannot hang the listing
_GONE = (mcp_types.CONNECTION_CLOSED,)


class ServerState(enum.StrEnum):
    STARTING = "starting"
    UP = "up"
    BACKOFF = "backoff"
    STOPPED = "stopped"


class _Down(Exception):
    """The connection is unusable; the reason is the message."""


def describe(exc: BaseException) -> str:
    """One line for a failure, the first leaf of an exception group (anyio wraps task failures)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, _Down):
        return str(exc)
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpServer:
    def __init__(self, name: str, cfg: McpServerConfig, mcp_cfg: McpConfig,
                 on_tools: Callable[[McpServer], None]) -> None:
        self.name, self.cfg, self.mcp_cfg = name, cfg, mcp_cfg
        self.state = ServerState.STARTING
        self.tools: dict[str, RemoteTool] = {}  # the current listing, by kith name
        self.restarts = 0
        self.last_error = ""
        self._on_tools = on_tools
        self._client: Client | None = None
        self._wake = asyncio.Event()
        self._broken = ""
        self._relist = False
        self.listed = asyncio.Event()  # the first connection attempt has ended (listed or failed)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # ----------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"mcp:{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._stopping = True
        if task is not None:
            # The SDK's anyio task groups can turn a cancel that lands while the client is being
            # entered into an error of their own (seen: shutdown waiting on a server task that went on
            # reconnecting): the loop ends on ``_stopping``. A cancel absorbed without a trace gets a
            # second one, but only after the SDK's own worst case of ending a stdio child (flush,
            # grace, SIGTERM, SIGKILL), which a second cancel must not cut short.
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_WAIT_S)
            if not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
            if not task.done():
                log.warning("MCP server %s did not stop within %.0f s; leaving it behind", self.name,
                            STOP_WAIT_S + 1.0)
            elif not task.cancelled():
                with contextlib.suppress(BaseException):
                    task.result()
        self.state = ServerState.STOPPED
        self._client = None

    @property
    def up(self) -> bool:
        return self.state is ServerState.UP and self._client is not None

    def health(self) -> dict[str, Any]:
        return {"state": self.state.value, "transport": self.cfg.transport, "tools": sorted(self.tools),
                "restarts": self.restarts, "last_error": self.last_error}

    async def _target(self, stack: contextlib.AsyncExitStack) -> Any:
        """What ``mcp.Client`` connects to; an HTTP client is closed with the connection (``stack``)."""
        if self.cfg.transport == "stdio":
            return StdioServerParameters(
                command=self.cfg.command, args=list(self.cfg.args),
                env={k: v.get_secret_value() for k, v in self.cfg.env.items()} or None,
                cwd=self.cfg.cwd,
            )
        headers = {k: v.get_secret_value() for k, v in self.cfg.headers.items()}
        timeout = httpx2.Timeout(self.cfg.connect_timeout_s, read=self.cfg.timeout_s + 5)
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=timeout))
        return streamable_http_client(self.cfg.url, http_client=http)

    async def _loop(self) -> None:
        backoff = Backoff(self.mcp_cfg.restart_base_delay_s, self.mcp_cfg.restart_max_delay_s)
        while True:
            self.state = ServerState.STARTING
            self._broken, self._relist = "", False
            started = time.monotonic()
            try:
                await self._connected()
                self.last_error = "the connection ended"
            except asyncio.CancelledError:
                self._client = None
                self.state = ServerState.STOPPED
                raise
            except Exception as exc:
                self.last_error = describe(exc)
            self._client = None
            if self._stopping:  # a cancel the SDK turned into an error: stop() asked for the end
                self.state = ServerState.STOPPED
                return
            self.state = ServerState.BACKOFF
            self.listed.set()
            if time.monotonic() - started > HEALTHY_AFTER_S:
                backoff.reset()
            delay = backoff.next_delay()
            self.restarts += 1
            log.warning("MCP server %s is down (%s); its tools are withdrawn; reconnecting in %.1fs",
                        self.name, self.last_error, delay)
            await asyncio.sleep(delay)

    async def _connected(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            # The handshake and listings are bounded by the client's read timeout (a call
            # passes its own). No cancel scope may wrap entering the client: its task group would
            # outlive the scope, which anyio refuses.
            client = Client(await self._target(stack), read_timeout_seconds=self.cfg.connect_timeout_s,
                            message_handler=self._on_message,
                            client_info=mcp_types.Implementation(name="kith", version="1"))
            await stack.enter_async_context(client)
            with anyio.fail_after(self.cfg.connect_timeout_s):
                listing = await self._list(client)
            self._client = client
            self.state = ServerState.UP
            self._publish(listing)
            self.listed.set()
            log.info("MCP server %s is up: %d tools (%s)", self.name, len(self.tools), ", ".join(sorted(self.tools)))
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._listen, client)
                    await self._watch(client)  # returns only by raising: the connection is unusable
            finally:
                # Withdrawn before the transport unwinds: closing a stuck child takes seconds.
                self._client = None
                self.state = ServerState.BACKOFF

    async def _listen(self, client: Client) -> None:
        """Re-list on a change: 2026-era servers announce it on a ``subscriptions/listen`` stream
        (older ones send ``notifications/tools/list_changed``, seen by ``_on_message``)."""
        try:
            async with client.listen(tools_list_changed=True) as changes:
                async for _event in changes:
                    self._relist = True
                    self._wake.set()
        except Exception as exc:  # an older server, or a lost stream (the pings notice a dead server)
            log.debug("MCP server %s: no change stream (%s)", self.name, describe(exc))

    async def _watch(self, client: Client) -> None:
        """Every ``ping_interval_s`` (or at once on a change notice) list the tools again: the probe that
        a server is alive and answering (``ping`` is gone from the 2026 protocol), and the refresh for
        servers that change their tools without saying so."""
        while True:
            with anyio.move_on_after(self.mcp_cfg.ping_interval_s):
                await self._wake.wait()
            self._wake.clear()
            self._relist = False
            if self._broken:
                raise _Down(self._broken)
            try:
                with anyio.fail_after(min(self.cfg.timeout_s, self.cfg.connect_timeout_s)):
                    listing = await self._list(client)
            except MCPError as exc:
                if exc.code in _GONE:
                    raise _Down(f"tools/list: {exc.error.message}") from exc
                log.warning("MCP server %s: tools/list failed (%s); keeping its last list", self.name,
                            exc.error.message[:200])
                continue
            except TimeoutError as exc:
                raise _Down("tools/list: no answer") from exc
            if self._publish(listing):
                log.info("MCP server %s changed its tools: %s", self.name, ", ".join(sorted(self.tools)))

    async def _list(self, client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _publish(self, listing: list[mcp_types.Tool]) -> bool:
        """Take a listing; True when it changed what is offered."""
        kept, skipped = convert(self.name, listing, allow=self.cfg.tools, max_schema_bytes=self.cfg.max_schema_bytes)
        tools = {t.name: t for t in kept}
        if tools == self.tools:
            return False
        for line in skipped:
            log.warning("MCP %s", line)
        if self.cfg.tools is not None:
            missing = set(self.cfg.tools) - {t.name for t in listing}
            if missing:
                log.warning("MCP server %s does not list the allowed tools %s", self.name, ", ".join(sorted(missing)))
        self.tools = tools
        self._on_tools(self)
        return True

    async def _on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, mcp_types.ToolListChangedNotification):
            self._relist = True
            self._wake.set()

    def _down(self, reason: str) -> None:
        if not self._broken:
            self._broken = reason
            self._wake.set()

    # ---------------------------------------------------------------------------------------- calls
    async def call(self, tool: RemoteTool, args: Mapping[str, Any]) -> str:
        """Run ``tool`` and return its result quoted as data; every failure is a ``ToolError``."""
        client = self._client
        if client is None or not self.up:
            raise ToolError(f"the MCP server {self.name!r} is not connected ({self.last_error or 'starting'}); "
                            "kith is reconnecting it, try again later")
        limit = self.cfg.max_result_chars
        try:
            result = await client.call_tool(tool.remote, dict(args), read_timeout_seconds=self.cfg.timeout_s)
        except MCPError as exc:
            if exc.code in _GONE:
                self._down(f"call: {exc.error.message}")
                raise ToolError(f"the MCP server {self.name!r} went away; kith is reconnecting it") from exc
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise ToolError(f"{tool.name} timed out after {self.cfg.timeout_s:g}s "
                                f"(the MCP server {self.name!r} did not answer)") from exc
            raise ToolError(quoted(self.name, tool.remote, exc.error.message, limit=limit, error=True)) from exc
        except TimeoutError as exc:
            raise ToolError(f"{tool.name} timed out after {self.cfg.timeout_s:g}s "
                            f"(the MCP server {self.name!r} did not answer)") from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError,
                httpx2.HTTPError) as exc:
            self._down(f"call: {describe(exc)}")
            raise ToolError(f"the MCP server {self.name!r} went away; kith is reconnecting it") from exc
        text = result_text(result)
        if result.is_error:
            raise ToolError(quoted(self.name, tool.remote, text, limit=limit, error=True))
        return quoted(self.name, tool.remote, text, limit=limit)
