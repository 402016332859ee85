"""Plugin-manager factory: built-in plugins, the ``kith`` and ``kith.config`` entry-point groups, config modules.

Loading is explicit (a factory, never an import side effect). The allow/deny list applies to every
source by plugin name, so an operator can switch off a built-in stage as easily as a third-party one.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

from gateway import hookspecs
from gateway.channels import ChannelRegistry
from gateway.config import Config, ConfigError, PluginsConfig, plugin_allowed
from gateway.hooks import Hooks

log = logging.getLogger("kith.plugins")

# Built-in plugins, registered first so third-party plugins (called last-registered-first) can
# override their firstresult hooks. Order matters only for "all" hooks without tryfirst/trylast.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "gateway.turn.protocol",
    "gateway.identity.resolve",
    "gateway.turn.commands",
    "gateway.http.web_command",
    "gateway.http.api.table",  # the host's /api routes, registered as plugins register theirs
    "gateway.llm.provider",
    "gateway.turn.record",
    "plugins.system_block",
    "plugins.persona",
    "plugins.media",
    "plugins.tools",
    "plugins.mcp_tools",
    "plugins.session_log",
    "plugins.memory_index",
    "plugins.memory_watch",
    "plugins.remember",
    "plugins.recall",
    "plugins.lore",
    "plugins.profile",
    "plugins.people",
    "plugins.playbooks",
    "plugins.compaction",
    "plugins.memory_writer",
    "plugins.sleep_cycle",
    "plugins.distill",
    "plugins.hygiene",
    "gateway.ops.attention_notice",  # the operator's notice about failing memory jobs, once a day at most
    "gateway.delivery.plugin",
    "plugins.schedule",
    "plugins.retention",
    "plugins.known_facts",
    "plugins.access",
    "adapters.websocket",
    "adapters.openai_api",
    "adapters.builtin",
)


@dataclass(slots=True)
class PluginInfo:
    name: str
    source: str  # builtin | entry-point <dist> | config | test
    hooks: list[str] = field(default_factory=list)


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, skipping fast what in a module cannot be a hook implementation.

    pluggy looks at every name in ``dir(plugin)`` through ``inspect.getattr_static``; a built-in plugin
    module holds hundreds of names (its imports), and every gateway registers about 40 of them, so
    that look-up was a fifth of a gateway's start. A hook implementation in a module is a function
    (or a bound method or a static/class method) in the module's own ``__dict__``; anything else
    there is skipped before the slow path, which still decides for the rest."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if isinstance(plugin, types.ModuleType):
            value = plugin.__dict__.get(name)
            if isinstance(value, types.FunctionType):  # what pluggy's slow path finds for it, read directly
                opts = getattr(value, self._impl_attr, None)
                return opts if isinstance(opts, dict) else None
            if not isinstance(value, _HOOKABLE):
                return None
        return super().parse_hookimpl_opts(plugin, name)

    @property
    def _impl_attr(self) -> str:
        return self.project_name + "_impl"


_HOOKABLE = (types.MethodType, staticmethod, classmethod)


class PluginHost:
    """The pluggy manager, where every plugin came from, and ``hooks``: the typed method per hook
    (``gateway.hooks.Hooks``) through which the host calls them."""

    def __init__(self, *, hook_timeout_s: float = 5.0) -> None:
        self.pm = _PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.hooks = Hooks(self.pm, timeout_s=hook_timeout_s)
        self.sources: dict[str, str] = {}
        self.blocked: list[tuple[str, str]] = []

    def register(self, plugin: Any, *, name: str | None = None, source: str) -> str | None:
        registered = self.pm.register(plugin, name=name)
        if registered is not None:
            self.sources[registered] = source
        return registered

    def plugins(self) -> list[PluginInfo]:
        infos = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])
            infos.append(PluginInfo(name=name, source=self.sources.get(name, "unknown"), hooks=hooks))
        return infos


_allowed = plugin_allowed


# The memory service names no plugin: the loader, which lists the built-ins, says which of them a
# config lets load and what that asks of the memory index.
_INDEXING_STAGE = "plugins.memory_index"  # indexes every write as it happens
_EVERY_TURN_STAGES = ("plugins.recall", _INDEXING_STAGE)  # use the index on every turn


def indexes_live(cfg: PluginsConfig) -> bool:
    """Writes are indexed as they happen (the indexing stage may load; ``MemoryService(live_indexing=)``)."""
    return plugin_allowed(_INDEXING_STAGE, cfg)


def uses_index_every_turn(cfg: PluginsConfig) -> bool:
    """A stage recalls or indexes on every turn: a background start loads the index (otherwise it loads
    on first use; ``MemoryService(every_turn=)``)."""
    return any(plugin_allowed(p, cfg) for p in _EVERY_TURN_STAGES)


def _import(module: str, source: str, problems: list[str]) -> Any | None:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # a broken third-party plugin must name itself, not crash startup
        problems.append(f"plugin {module!r} ({source}) failed to import: {type(exc).__name__}: {exc}")
        return None


# Built-in plugins that declare channel sections (``gateway_register_channels``). Reading a config
# loads them to validate ``channels.<name>`` (``declared_channels``), so they must import no platform
# SDK and no model: every CLI command reads a config (tests/footprint/test_cli_lazy.py).
# tests/core/test_channel_config.py checks that every built-in declaring a channel is listed here.
CONFIG_PLUGINS: tuple[str, ...] = ("adapters.builtin",)
# The entry-point group of third-party modules that declare config sections, for the same reason: a
# distribution's main plugin (group ``kith``) may import anything, its declarations here stay light.
CONFIG_ENTRY_POINTS = "kith.config"


def build_plugin_host(
    config: Config,
    *,
    extra_plugins: Sequence[Any] = (),
    builtins: Iterable[str] = BUILTIN_PLUGINS,
    entry_points: bool | None = None,
) -> PluginHost:
    """Build the plugin host. Raises ConfigError listing every plugin that failed to load."""
    cfg = config.plugins
    host = PluginHost(hook_timeout_s=cfg.hook_timeout_s)
    problems: list[str] = []
    use_eps = cfg.entry_points if entry_points is None else entry_points
    groups = (hookspecs.PROJECT, CONFIG_ENTRY_POINTS) if use_eps else ()
    _load(host, cfg, builtins=builtins, groups=groups, extra_plugins=extra_plugins, problems=problems)
    # Plugins may add hookspecs; do that before checking that every implementation has a spec.
    host.hooks.addhooks()
    try:
        host.pm.check_pending()
    except pluggy.PluginValidationError as exc:
        problems.append(f"plugin implements an unknown hook: {exc}")
    if problems:
        raise ConfigError(problems, "plugins")
    return host


def declared_channels(cfg: PluginsConfig, *, extra_plugins: Sequence[Any] = ()) -> tuple[ChannelRegistry, list[str]]:
    """The channel sections that the plugins of a config declare, for reading that config, and the
    problems met loading those plugins.

    Loaded: the built-ins of ``CONFIG_PLUGINS``, whatever ``plugins.allow``/``deny`` say (a built-in
    channel's section is as valid with its plugin denied as it always was; its adapter is simply not
    created); the ``kith.config`` entry points (when ``plugins.entry_points``), ``plugins.modules`` and
    ``extra_plugins``, filtered by allow/deny as ``build_plugin_host`` filters them, so a denied plugin
    is never imported."""
    host = PluginHost(hook_timeout_s=cfg.hook_timeout_s)
    problems: list[str] = []
    _load(host, cfg, builtins=CONFIG_PLUGINS, groups=(CONFIG_ENTRY_POINTS,) if cfg.entry_points else (),
          extra_plugins=extra_plugins, problems=problems, filter_builtins=False)  # fmt: skip
    declared = host.hooks.register_channels()
    return declared, problems


def _load(host: PluginHost, cfg: PluginsConfig, *, builtins: Iterable[str], groups: Sequence[str],
          extra_plugins: Sequence[Any], problems: list[str], filter_builtins: bool = True) -> None:  # fmt: skip
    """Register the plugins of every source into ``host``, in order: built-ins, the entry points of
    ``groups``, config modules, extra plugins (tests); what fails to load is a problem, the rest
    still load. allow/deny name an entry point by its name in any group."""
    for module in builtins:
        if filter_builtins and not _allowed(module, cfg):
            host.blocked.append((module, "builtin"))
            continue
        mod = _import(module, "builtin", problems)
        if mod is not None:
            host.register(mod, name=module, source="builtin")

    for group in groups:
        for ep in importlib.metadata.entry_points(group=group):
            dist = ep.dist.name if ep.dist else "?"
            if not _allowed(ep.name, cfg):
                if (ep.name, f"entry-point {dist}") not in host.blocked:  # once for both of its groups
                    host.blocked.append((ep.name, f"entry-point {dist}"))
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                problems.append(f"entry point {ep.name!r} from {dist} failed to load: {exc}")
                continue
            if host.pm.is_registered(plugin):
                continue
            # A distribution's kith.config module is a plugin of its own, next to its main one.
            name = ep.name if group == hookspecs.PROJECT else f"{ep.name}:{group.removeprefix('kith.')}"
            host.register(plugin, name=name, source=f"entry-point {dist}")

    for module in cfg.modules:
        if not _allowed(module, cfg):
            host.blocked.append((module, "config"))
            continue
        mod = _import(module, "config", problems)
        if mod is not None and not host.pm.is_registered(mod):
            host.register(mod, name=module, source="config")

    for i, plugin in enumerate(extra_plugins):
        name = getattr(plugin, "__name__", None) or f"{type(plugin).__name__}-{i}"
        if _allowed(name, cfg) and not host.pm.is_registered(plugin):
            host.register(plugin, name=name, source="test")
