"""The typed face of the hooks: one method per hook in ``gateway.hookspecs``.

Nothing outside this module (and the mechanics in ``gateway.hookcall``) names a hook by string or
reaches ``pm.hook``: call sites get typed arguments and typed results, and how each hook is called
(every implementation or the first answer, isolated or loud, bounded by ``plugins.hook_timeout_s``
or not) is decided here once, next to the method's name. tests/core/test_import_rules.py keeps it so.

A result of the wrong type from a "first" hook is treated as no answer (``None``), as the call sites
did before they were typed. Hooks a third-party plugin adds through ``gateway_addhooks`` are that
plugin's to call, through the plugin manager it is given there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

from gateway.channels import ChannelRegistry
from gateway.config import Config, ConfigError
from gateway.delivery.sections import BriefingSection
from gateway.hookcall import HookCaller
from gateway.types import (
    AccessDecision,
    ContextSection,
    Drop,
    InboundMessage,
    LLMRequest,
    LLMResponse,
    PreparedMessage,
    Reply,
    Session,
    ToolCall,
    Turn,
    UserRef,
)

if TYPE_CHECKING:
    from datetime import datetime

    from gateway.adapter import AdapterRegistry
    from gateway.app import Gateway
    from gateway.bus.registry import JobRegistry
    from gateway.command_registry import CommandRegistry
    from gateway.http.api.registry import RouteRegistry
    from gateway.tools import ToolRegistry


@dataclass(frozen=True, slots=True)
class Registrations:
    """What every plugin registered, collected once per gateway at start-up."""

    adapters: AdapterRegistry
    jobs: JobRegistry
    tools: ToolRegistry
    commands: CommandRegistry
    routes: RouteRegistry
    channels: ChannelRegistry = field(default_factory=ChannelRegistry)

    @property
    def problems(self) -> list[str]:
        return [*self.adapters.problems, *self.jobs.problems, *self.tools.problems, *self.commands.problems,
                *self.routes.problems, *self.channels.problems]


class Hooks:
    """Calls the hooks of one plugin manager; ``failures`` counts isolated plugin failures by plugin."""

    def __init__(self, pm: pluggy.PluginManager, *, timeout_s: float = 5.0) -> None:
        self._pm = pm
        self._call = HookCaller(pm, timeout_s=timeout_s)

    @property
    def failures(self) -> dict[str, int]:
        return self._call.failures

    # ------------------------------------------------------------------------------------ bootstrap
    def addhooks(self) -> None:
        self._call.call_historic("gateway_addhooks", pluginmanager=self._pm)

    def configure(self, config: Config) -> None:
        self._call.call_historic("gateway_configure", config=config)

    def register_channels(self) -> ChannelRegistry:
        """The channel sections the plugins declare (``channels.<name>``); problems on the registry."""
        declared = ChannelRegistry()
        self._call.call_register("gateway_register_channels", declared)
        return declared

    def registrations(self, config: Config) -> Registrations:
        """Adapters, jobs, tools, commands and HTTP routes from every plugin; every problem in one
        ``ConfigError``.

        Also the channel sections again, from every plugin of this gateway: each must be in
        ``config.channels`` as its own model, i.e. the config was read with the same plugins."""
        # Imported here, not at the top: reading a config builds a plugin host too (its channel
        # sections, gateway.plugins.declared_channels), and every CLI command reads one.
        from gateway.adapter import AdapterRegistry
        from gateway.bus.registry import JobRegistry
        from gateway.command_registry import CommandRegistry
        from gateway.http.api.registry import RouteRegistry
        from gateway.tools import ToolRegistry

        regs = Registrations(AdapterRegistry(), JobRegistry(), ToolRegistry(), CommandRegistry(), RouteRegistry(),
                             self.register_channels())  # fmt: skip
        for name, model in regs.channels.items():
            if not isinstance(config.channels.get(name), model):
                regs.channels.problems.append(
                    f"channel {name!r} ({regs.channels.plugin_of(name) or '?'}) is not in this config: it was read"
                    " without the plugin (declare channels from a kith.config entry point, docs/plugins.md; in"
                    " tests pass the plugin to parse_config(..., plugins=...))")
        self._call.call_register("gateway_register_adapters", regs.adapters, config=config)
        self._call.call_register("gateway_register_jobs", regs.jobs, config=config)
        self._call.call_register("gateway_register_tools", regs.tools, config=config)
        self._call.call_register("gateway_register_commands", regs.commands, config=config)
        self._call.call_register("gateway_register_routes", regs.routes, config=config)
        if regs.problems:
            raise ConfigError(regs.problems, "plugin registrations")
        return regs

    # ------------------------------------------------------------------------------------ lifecycle
    async def startup(self, gateway: Gateway) -> None:
        await self._call.call_all("gateway_startup", timeout=None, gateway=gateway)

    async def shutdown(self, gateway: Gateway) -> None:
        await self._call.call_all("gateway_shutdown", timeout=None, gateway=gateway)

    # -------------------------------------------------------------------------------------- inbound
    async def filter_inbound(self, message: InboundMessage) -> Drop | None:
        drop = await self._call.call_first("gateway_filter_inbound", message=message)
        return drop if isinstance(drop, Drop) else None

    async def check_access(self, gateway: Gateway, message: InboundMessage) -> AccessDecision | Drop | None:
        decision = await self._call.call_first("gateway_check_access", gateway=gateway, message=message)
        return decision if isinstance(decision, AccessDecision | Drop) else None

    async def resolve_identity(self, gateway: Gateway, message: InboundMessage) -> UserRef | None:
        user = await self._call.call_first("gateway_resolve_identity", isolate=False, gateway=gateway,
                                           message=message)  # fmt: skip
        return user if isinstance(user, UserRef) else None

    async def before_users_merge(self, gateway: Gateway, *, into: str, source: str) -> None:
        await self._call.call_all("gateway_before_users_merge", timeout=None, gateway=gateway, into=into,
                                  source=source)  # fmt: skip

    async def users_merged(self, gateway: Gateway, *, into: str, source: str) -> None:
        await self._call.call_all("gateway_users_merged", gateway=gateway, into=into, source=source)

    async def memory_edited(self, gateway: Gateway, *, user_id: str, paths: list[str]) -> None:
        await self._call.call_all("gateway_memory_edited", gateway=gateway, user_id=user_id, paths=paths)

    async def handle_command(self, gateway: Gateway, turn: Turn, command: str, args: str) -> Reply | None:
        answer = await self._call.call_first("gateway_handle_command", gateway=gateway, turn=turn, command=command,
                                             args=args)  # fmt: skip
        return answer if isinstance(answer, Reply) else None

    async def conversation_changed(self, gateway: Gateway, *, user_id: str) -> None:
        await self._call.call_all("gateway_conversation_changed", gateway=gateway, user_id=user_id)

    # ----------------------------------------------------------------------------------------- turn
    async def handle_turn(self, gateway: Gateway, turn: Turn) -> Reply | None:
        reply = await self._call.call_first("gateway_handle_turn", isolate=False, timeout=None, gateway=gateway,
                                            turn=turn)  # fmt: skip
        return reply if isinstance(reply, Reply) else None

    async def session_started(self, gateway: Gateway, turn: Turn, session: Session) -> None:
        await self._call.call_all("gateway_session_started", gateway=gateway, turn=turn, session=session)

    async def prepare_message(self, gateway: Gateway, turn: Turn) -> PreparedMessage | Reply | None:
        """Not bounded by the hook timeout: the media pipeline bounds its own reads and calls."""
        prepared = await self._call.call_first("gateway_prepare_message", timeout=None, gateway=gateway, turn=turn)
        return prepared if isinstance(prepared, PreparedMessage | Reply) else None

    async def context_sections(self, gateway: Gateway, turn: Turn) -> list[ContextSection]:
        """Every plugin's sections, flattened (a plugin may return one section or a list)."""
        sections: list[ContextSection] = []
        for result in await self._call.call_all("gateway_context_sections", gateway=gateway, turn=turn):
            if isinstance(result, ContextSection):
                sections.append(result)
            else:
                sections.extend(s for s in result if isinstance(s, ContextSection))
        return sections

    async def briefing_sections(self, gateway: Gateway, user_id: str, now: datetime) -> list[BriefingSection]:
        """Every plugin's briefing sections, flattened (one section or a list each)."""
        sections: list[BriefingSection] = []
        for result in await self._call.call_all("gateway_briefing_sections", gateway=gateway, user_id=user_id,
                                                now=now):  # fmt: skip
            if isinstance(result, BriefingSection):
                sections.append(result)
            elif isinstance(result, list):
                sections.extend(s for s in result if isinstance(s, BriefingSection))
        return sections

    # ------------------------------------------------------------------------------------------ llm
    async def before_llm_call(self, gateway: Gateway, turn: Turn, request: LLMRequest) -> LLMRequest | None:
        replaced = await self._call.call_first("gateway_before_llm_call", gateway=gateway, turn=turn,
                                               request=request)  # fmt: skip
        return replaced if isinstance(replaced, LLMRequest) else None

    async def llm_call(self, gateway: Gateway, turn: Turn | None, request: LLMRequest,
                       on_delta: Callable[[str], Any] | None) -> LLMResponse | None:  # fmt: skip
        """Not bounded by the hook timeout (``llm.timeout_s`` is the provider's); a failure is loud."""
        response = await self._call.call_first("gateway_llm_call", isolate=False, timeout=None, gateway=gateway,
                                               turn=turn, request=request, on_delta=on_delta)  # fmt: skip
        return response if isinstance(response, LLMResponse) else None

    # ------------------------------------------------------------------------------------- outbound
    async def render_reply(self, gateway: Gateway, turn: Turn, response: LLMResponse) -> Reply | None:
        reply = await self._call.call_first("gateway_render_reply", gateway=gateway, turn=turn, response=response)
        return reply if isinstance(reply, Reply) else None

    # ---------------------------------------------------------------------------------------- after
    async def after_turn(self, gateway: Gateway, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
        await self._call.call_all("gateway_after_turn", gateway=gateway, turn=turn, reply=reply, response=response)

    async def flush(self, gateway: Gateway) -> None:
        await self._call.call_all("gateway_flush", timeout=None, gateway=gateway)

    async def turn_error(self, gateway: Gateway, turn: Turn, error: BaseException) -> None:
        await self._call.call_all("gateway_turn_error", gateway=gateway, turn=turn, error=error)

    # ---------------------------------------------------------------------------------------- tools
    async def before_tool_call(self, gateway: Gateway, turn: Turn, call: ToolCall) -> str | None:
        """The veto reason, or None. A plugin that raises propagates: the caller refuses the call."""
        veto = await self._call.call_first("gateway_before_tool_call", isolate=False, gateway=gateway, turn=turn,
                                           call=call)  # fmt: skip
        return veto if isinstance(veto, str) and veto else None
