"""What every plugin registered (adapters, jobs, tools, commands, HTTP routes, channel sections),
collected once per gateway at start-up, with every problem in one ``ConfigError``.

The gateway keeps them as ``gateway.registrations``, and the registries read at run time in its stash
(``TOOLS``, ``COMMANDS``, ``ROUTES``, each next to its registry): modules typed against
``gateway.services.Services`` read them from there. They are not part of that Protocol because what
they hold (tools, routes, adapter classes) takes the gateway itself, so naming them in it would put
every registry in one import cycle with it (tests/core/test_import_cycles.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.adapter import AdapterRegistry
from gateway.bus.registry import JobRegistry
from gateway.channels import ChannelRegistry
from gateway.config import Config, ConfigError
from gateway.hooks import Hooks
from gateway.http.api.registry import ROUTES, RouteRegistry
from gateway.tools import TOOLS, ToolRegistry
from gateway.turn.command_registry import COMMANDS, CommandRegistry
from gateway.types import Stash


@dataclass(frozen=True, slots=True)
class Registrations:
    """What every plugin registered, collected once per gateway at start-up."""

    adapters: AdapterRegistry
    jobs: JobRegistry
    tools: ToolRegistry
    commands: CommandRegistry
    routes: RouteRegistry
    channels: ChannelRegistry = field(default_factory=ChannelRegistry)

    def share(self, stash: Stash) -> None:
        """Put the registries modules read at run time into the gateway's stash, each under the key next
        to its registry (``TOOLS``, ``COMMANDS``, ``ROUTES``)."""
        stash[TOOLS] = self.tools
        stash[COMMANDS] = self.commands
        stash[ROUTES] = self.routes

    @property
    def problems(self) -> list[str]:
        return [*self.adapters.problems, *self.jobs.problems, *self.tools.problems, *self.commands.problems,
                *self.routes.problems, *self.channels.problems]


def collect_registrations(hooks: Hooks, config: Config) -> Registrations:
    """Adapters, jobs, tools, commands and HTTP routes from every plugin; every problem in one
    ``ConfigError``.

    Also the channel sections again, from every plugin of this gateway: each must be in
    ``config.channels`` as its own model, i.e. the config was read with the same plugins."""
    regs = Registrations(AdapterRegistry(), JobRegistry(), ToolRegistry(), CommandRegistry(), RouteRegistry(),
                         hooks.register_channels())  # fmt: skip
    for name, model in regs.channels.items():
        if not isinstance(config.channels.get(name), model):
            regs.channels.problems.append(
                f"channel {name!r} ({regs.channels.plugin_of(name) or '?'}) is not in this config: it was read"
                " without the plugin (declare channels from a kith.config entry point, docs/plugins.md; in"
                " tests pass the plugin to parse_config(..., plugins=...))")
    hooks.register_adapters(regs.adapters, config)
    hooks.register_jobs(regs.jobs, config)
    hooks.register_tools(regs.tools, config)
    hooks.register_commands(regs.commands, config)
    hooks.register_routes(regs.routes, config)
    if regs.problems:
        raise ConfigError(regs.problems, "plugin registrations")
    return regs
