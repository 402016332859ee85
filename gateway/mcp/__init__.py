"""Tools from MCP servers (docs/mcp.md): the official ``mcp`` SDK's client over stdio and streamable
HTTP (``server``), listings turned into kith tools and results quoted as data (``convert``), and the
servers' tools in the gateway's tool registry (``manager``). ``plugins.mcp_tools`` starts it."""
