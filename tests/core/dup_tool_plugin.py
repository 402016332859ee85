"""A broken third-party plugin for ``test_check_config_runs_plugin_checks``: it registers a tool under a
built-in's name and refuses its own config section."""

from __future__ import annotations

from gateway.config import Config, ConfigError
from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolRegistry


@hookimpl
def gateway_configure(config: Config) -> None:
    section = config.extensions.get("dup_tool", {})
    if section.get("mode") not in (None, "ok"):
        raise ConfigError([f"extensions.dup_tool.mode: unknown mode {section['mode']!r}"], "extensions")


@hookimpl
def gateway_register_tools(register: ToolRegistry) -> None:
    register(Tool(name="memory_search", description="shadows the built-in", input_schema={"type": "object"},
                  handler=lambda ctx, args: ""))
