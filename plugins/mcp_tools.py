"""Built-in plugin: tools from the MCP servers in ``mcp.servers`` (docs/mcp.md).

``gateway_configure`` checks what pydantic cannot (a stdio command that is not on PATH), so
``kith check-config`` reports it; ``gateway_startup`` connects the servers in the daemon and puts
their tools into the gateway's tool registry (gateway/mcp/manager.py); ``gateway_shutdown`` stops
them. A worker or a read-only CLI command starts no server: tools run only in the daemon's turns.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from gateway.config import Config, ConfigError
from gateway.hookspecs import hookimpl
from gateway.mcp import MANAGER
from gateway.tools import TOOLS

if TYPE_CHECKING:
    from gateway.services import Services

PLUGIN = "plugins.mcp_tools"


def problems(config: Config) -> list[str]:
    found = []
    for name, server in config.mcp.servers.items():
        if server.enabled and server.transport == "stdio" and shutil.which(server.command) is None:
            found.append(f"mcp.servers.{name}.command: {server.command!r} is not an executable on PATH")
        if server.cwd is not None and not server.cwd.is_dir():
            found.append(f"mcp.servers.{name}.cwd: {str(server.cwd)!r} is not a directory")
    return found


@hookimpl
def gateway_configure(config: Config) -> None:
    found = problems(config)
    if found:
        raise ConfigError(found, "mcp")


@hookimpl
async def gateway_startup(gateway: Services) -> None:
    if not gateway.config.mcp.servers or gateway.mode != "daemon" or not gateway.run_jobs:
        return
    from gateway.mcp.manager import McpManager  # the SDK loads only when a server is configured

    manager = McpManager(gateway.config.mcp, gateway.stash[TOOLS], plugin=PLUGIN)
    gateway.stash[MANAGER] = manager
    await manager.start()


@hookimpl
async def gateway_shutdown(gateway: Services) -> None:
    manager = gateway.stash.pop(MANAGER)
    if manager is not None:
        await manager.stop()
