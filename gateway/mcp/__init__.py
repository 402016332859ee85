"""Tools from MCP servers (docs/mcp.md): the official ``mcp`` SDK's client over stdio and streamable
HTTP (``server``), listings turned into kith tools and results quoted as data (``convert``), and the
servers' tools in the gateway's tool registry (``manager``). ``plugins.mcp_tools`` starts it.

This package root imports nothing heavy: the SDK is loaded only when servers are configured."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.mcp.manager import McpManager

#: The running servers of a gateway (set by plugins.mcp_tools; read by /healthz).
MANAGER: StashKey[McpManager] = StashKey()
