"""The MCP client's settings (``mcp:`` in config.yaml; docs/mcp.md): the servers whose tools the
model may use, and how they are watched and restarted."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.configtypes import Section

_MCP_SERVER_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]|_(?!_)){0,23}$")


class McpServerConfig(Section):
    """One MCP server whose tools the model may use (docs/mcp.md). ``env`` and ``headers`` are secrets:
    redacted from every log line."""

    enabled: bool = True
    transport: Literal["stdio", "http"] = "stdio"
    command: str = ""  # stdio: the executable (looked up on PATH)
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)  # stdio: added to a minimal inherited environment
    cwd: Path | None = None
    url: str = ""  # http: the streamable HTTP endpoint, e.g. https://host/mcp
    headers: dict[str, SecretStr] = Field(default_factory=dict)  # http: e.g. Authorization
    tools: list[str] | None = None  # the server's tool names to offer (None = all it lists)
    tier: int = Field(2, ge=1, le=4)  # the lowest context tier that offers these tools
    private: bool = True  # reaches the operator's or a person's own data: never offered in group conversations
    writes: bool | None = None  # changes something: never Off-The-Record; None = unless the tool is readOnlyHint
    timeout_s: float = Field(30.0, gt=0, le=600)  # one tool call; a server that hangs is cut off here
    connect_timeout_s: float = Field(20.0, gt=0, le=300)
    max_result_chars: int = Field(8000, ge=200, le=16000)
    max_schema_bytes: int = Field(16 * 1024, ge=256, le=256 * 1024)

    @model_validator(mode="after")
    def _transport_fields(self) -> McpServerConfig:
        if self.transport == "stdio":
            if not self.command.strip():
                raise ValueError("transport stdio needs 'command'")
            if self.url or self.headers:
                raise ValueError("'url' and 'headers' are for transport http")
        else:
            if not re.match(r"^https?://[^/\s]+", self.url):
                raise ValueError("transport http needs 'url' (http:// or https://)")
            if self.command or self.args or self.env or self.cwd is not None:
                raise ValueError("'command', 'args', 'env' and 'cwd' are for transport stdio")
        return self


class McpConfig(Section):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    ping_interval_s: float = Field(30.0, gt=0, le=3600)  # how soon a dead or hung idle server is noticed
    restart_base_delay_s: float = Field(1.0, gt=0, le=60)
    restart_max_delay_s: float = Field(60.0, gt=0, le=3600)
    startup_wait_s: float = Field(10.0, ge=0, le=120)  # start-up waits this long for the first tool lists

    @field_validator("servers")
    @classmethod
    def _server_names(cls, v: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        bad = [name for name in v if not _MCP_SERVER_NAME.match(name)]
        if bad:
            raise ValueError(f"server names must be 1-24 of [a-z0-9_-] without '__' (tools are named "
                             f"<server>__<tool>): {', '.join(map(repr, bad))}")
        return v
