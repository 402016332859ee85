"""The one registry pattern: named things plugins register (adapters, jobs, tools, commands, HTTP routes).

A ``Registry[T]`` is handed to a registration hook (``register``); the plugin calls it once per thing
it provides, exactly as built-ins do (tox ``register.py``). Every registry follows one policy:

* each entry is attributed to the plugin whose hook registered it;
* a name registered twice is a problem, whichever plugins did it (the first entry stays, so the
  report names both);
* a bad entry (not the right type, an invalid spec) is a problem, and the plugin's other entries
  are still looked at;
* nothing raises while plugins register: ``gateway.registrations.collect_registrations`` collects every
  kind once in ``Gateway.start`` and reports every problem together in one ``ConfigError``.

The kinds (``AdapterRegistry``, ``JobRegistry``, ``ToolRegistry``, ``CommandRegistry``,
``ChannelRegistry``, ``RouteRegistry``) live next to what they register and add only a typed ``__call__``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, each with its plugin, and the problems found while plugins registered."""

    kind: ClassVar[str] = "entry"

    def __init__(self) -> None:
        self._entries: dict[str, T] = {}
        self._plugins: dict[str, str] = {}
        self.problems: list[str] = []
        #: The plugin whose hook is running; set by the collector (``attributed``).
        self.plugin = ""

    @contextmanager
    def attributed(self, plugin: str) -> Iterator[None]:
        """Attribute what is registered inside the block to ``plugin``."""
        previous, self.plugin = self.plugin, plugin
        try:
            yield
        finally:
            self.plugin = previous

    def add(self, name: str, entry: T) -> bool:
        """Record ``entry`` under ``name``; False (and a problem) when the name is taken."""
        if name in self._entries:
            self.problems.append(
                f"{self.kind} {name!r} registered twice ({self._plugins[name] or '?'} and {self.plugin or '?'})"
            )
            return False
        self._entries[name] = entry
        self._plugins[name] = self.plugin
        return True

    def remove(self, name: str) -> None:
        """Withdraw ``name``: for sources whose entries change while kith runs (an MCP server's tools,
        gateway/mcp/); what plugins register at start-up stays for the gateway's life."""
        self._entries.pop(name, None)
        self._plugins.pop(name, None)

    def problem(self, text: str) -> None:
        """A bad entry from the plugin registering now."""
        self.problems.append(f"plugin {self.plugin or '?'}: {text}")

    def plugin_of(self, name: str) -> str:
        return self._plugins[name]

    def get(self, name: str) -> T | None:
        return self._entries.get(name)

    def items(self) -> list[tuple[str, T]]:
        """In registration order (plugins in call order)."""
        return list(self._entries.items())

    def values(self) -> list[T]:
        return list(self._entries.values())

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
