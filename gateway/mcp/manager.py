"""Every configured MCP server, and its tools in the gateway's ``ToolRegistry``.

MCP tools are ordinary ``gateway.tools.Tool`` entries, so the host offers and runs them exactly like
built-in ones: the tier (``tier`` of the server), the group gate (``private``), the Off-The-Record
gate (``writes``, by default from the tool's ``readOnlyHint``), ``gateway_before_tool_call`` vetoes,
the tool timeout and the result cap; a tool whose annotations say ``destructiveHint: true`` runs only
after its person's ``/approve`` (``Tool.needs_approval``). A server's listing is known only once it is connected, so its
tools enter the registry then (attributed to the MCP plugin), follow its ``list_changed``
notifications, and are offered only while the server is up (``Tool.available``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gateway.mcp.convert import RemoteTool
from gateway.mcp.server import McpServer
from gateway.mcp.settings import McpConfig
from gateway.tools import Tool, ToolContext, ToolRegistry

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.mcp")

TIMEOUT_MARGIN_S = 2.0  # the SDK's own read timeout answers first, with a clearer error
PREVIEW_CHARS = 2000  # arguments shown in an approval request


class McpManager:
    def __init__(self, config: McpConfig, registry: ToolRegistry, *, plugin: str) -> None:
        self.config = config
        self.registry = registry
        self.plugin = plugin
        self.servers: dict[str, McpServer] = {
            name: McpServer(name, cfg, config, self._sync) for name, cfg in config.servers.items() if cfg.enabled
        }
        self._mine: dict[str, set[str]] = {name: set() for name in self.servers}

    async def start(self) -> None:
        """Connect every server; wait at most ``startup_wait_s`` for their first listings (the rest
        arrive in the background)."""
        for server in self.servers.values():
            server.start()
        if self.servers and self.config.startup_wait_s > 0:
            waits = [asyncio.ensure_future(s.listed.wait()) for s in self.servers.values()]
            _, pending = await asyncio.wait(waits, timeout=self.config.startup_wait_s)
            for task in pending:
                task.cancel()

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)
        for server in self.servers.values():
            for name in self._mine[server.name]:
                self.registry.remove(name)
            self._mine[server.name].clear()

    def health(self) -> dict[str, Any]:
        return {name: s.health() for name, s in self.servers.items()}

    def problems(self) -> list[str]:
        """One line per server that is not up (its tools are withdrawn meanwhile)."""
        return [f"MCP server {name} is {s.state.value}: {s.last_error or 'connecting'}"
                for name, s in self.servers.items() if not s.up]

    def _sync(self, server: McpServer) -> None:
        """Make the registry hold exactly ``server.tools`` (each entry bound to its listing)."""
        mine = self._mine[server.name]
        for name in sorted(mine - set(server.tools)):
            self.registry.remove(name)
            mine.discard(name)
        for name, remote in server.tools.items():
            current = self.registry.get(name)
            if current is not None and name not in mine:
                log.error("MCP server %s: tool %s is not offered: plugin %s registered that name",
                          server.name, name, self.registry.plugin_of(name))
                continue
            if current is not None:
                self.registry.remove(name)
            with self.registry.attributed(self.plugin):
                self.registry(self._tool(server, remote))
            mine.add(name)

    def _tool(self, server: McpServer, remote: RemoteTool) -> Tool:
        cfg = server.cfg

        async def handler(ctx: ToolContext, args: Mapping[str, Any]) -> str:
            return await server.call(remote, args)

        def available(_gateway: Services) -> bool:
            # A listing replaced since (list_changed) or a server that went down: not offered.
            return server.up and server.tools.get(remote.name) is remote

        def preview(ctx: ToolContext, args: Mapping[str, Any]) -> str:
            # All kith can say of what will happen: which tool of which server, with exactly these arguments.
            shown = json.dumps(dict(args), ensure_ascii=False, sort_keys=True)
            if len(shown) > PREVIEW_CHARS:
                shown = shown[:PREVIEW_CHARS] + "…"
            return (f"Call {remote.remote!r} on the MCP server {server.name!r} (it says the call may destroy or "
                    f"overwrite data) with {shown}.")

        return Tool(
            name=remote.name, description=remote.description, input_schema=remote.input_schema,
            handler=handler, min_tier=cfg.tier, private=cfg.private,
            writes=cfg.writes if cfg.writes is not None else not remote.read_only,
            available=available, timeout_s=cfg.timeout_s + TIMEOUT_MARGIN_S,
            needs_approval=remote.destructive, preview=preview if remote.destructive else None,
        )
