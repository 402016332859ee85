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
from typing import TYPE_CHECKING, Any

import pluggy

from gateway.channels import ChannelRegistry
from gateway.config import Config
from gateway.delivery.sections import BriefingSection
from gateway.hookcall import HookCaller
from gateway.registry import Registry
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
    from gateway.bus.registry import JobRegistry
    from gateway.services import Services
    from gateway.turn.command_registry import CommandRegistry


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

    # Registration hooks, collected once per gateway by ``gateway.registrations.collect_registrations``.
    # Tools and routes are typed ``Registry[Any]`` here: what they hold takes the gateway, so naming
    # their registries would tie this module into a cycle with the Services it is typed against; the
    # hookspecs carry the precise types.
    def register_adapters(self, register: AdapterRegistry, config: Config) -> None:
        self._call.call_register("gateway_register_adapters", register, config=config)

    def register_jobs(self, register: JobRegistry, config: Config) -> None:
        self._call.call_register("gateway_register_jobs", register, config=config)

    def register_tools(self, register: Registry[Any], config: Config) -> None:
        self._call.call_register("gateway_register_tools", register, config=config)

    def register_commands(self, register: CommandRegistry, config: Config) -> None:
        self._call.call_register("gateway_register_commands", register, config=config)

    def register_routes(self, register: Registry[Any], config: Config) -> None:
        self._call.call_register("gateway_register_routes", register, config=config)

    # ------------------------------------------------------------------------------------ lifecycle
    async def startup(self, gateway: Services) -> None:
        await self._call.call_all("gateway_startup", timeout=None, gateway=gateway)

    async def shutdown(self, gateway: Services) -> None:
        await self._call.call_all("gateway_shutdown", timeout=None, gateway=gateway)

    # -------------------------------------------------------------------------------------- inbound
    async def filter_inbound(self, message: InboundMessage) -> Drop | None:
        drop = await self._call.call_first("gateway_filter_inbound", message=message)
        return drop if isinstance(drop, Drop) else None

    async def check_access(self, gateway: Services, message: InboundMessage) -> AccessDecision | Drop | None:
        decision = await self._call.call_first("gateway_check_access", gateway=gateway, message=message)
        return decision if isinstance(decision, AccessDecision | Drop) else None

    async def resolve_identity(self, gateway: Services, message: InboundMessage) -> UserRef | None:
        user = await self._call.call_first("gateway_resolve_identity", isolate=False, gateway=gateway,
                                           message=message)  # fmt: skip
        return user if isinstance(user, UserRef) else None

    async def before_users_merge(self, gateway: Services, *, into: str, source: str) -> None:
        await self._call.call_all("gateway_before_users_merge", timeout=None, gateway=gateway, into=into,
                                  source=source)  # fmt: skip

    async def users_merged(self, gateway: Services, *, into: str, source: str) -> None:
        await self._call.call_all("gateway_users_merged", gateway=gateway, into=into, source=source)

    async def memory_edited(self, gateway: Services, *, user_id: str, paths: list[str]) -> None:
        await self._call.call_all("gateway_memory_edited", gateway=gateway, user_id=user_id, paths=paths)

    async def handle_command(self, gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
        """Not bounded by the hook timeout: a command is the person's own act, and cancelling it halfway
        leaves it half done (a ``/forget undo`` with its files back and its index not yet). A handler that
        raises ends the call with ``HookFailed``: the person hears that the command failed, never that
        it is unknown."""
        answer = await self._call.call_first("gateway_handle_command", timeout=None, stop_on_failure=True,
                                             gateway=gateway, turn=turn, command=command, args=args)  # fmt: skip
        return answer if isinstance(answer, Reply) else None

    async def conversation_changed(self, gateway: Services, *, user_id: str) -> None:
        await self._call.call_all("gateway_conversation_changed", gateway=gateway, user_id=user_id)

    # ----------------------------------------------------------------------------------------- turn
    async def handle_turn(self, gateway: Services, turn: Turn) -> Reply | None:
        reply = await self._call.call_first("gateway_handle_turn", isolate=False, timeout=None, gateway=gateway,
                                            turn=turn)  # fmt: skip
        return reply if isinstance(reply, Reply) else None

    async def session_started(self, gateway: Services, turn: Turn, session: Session) -> None:
        await self._call.call_all("gateway_session_started", gateway=gateway, turn=turn, session=session)

    async def prepare_message(self, gateway: Services, turn: Turn) -> PreparedMessage | Reply | None:
        """Not bounded by the hook timeout: the media pipeline bounds its own reads and calls."""
        prepared = await self._call.call_first("gateway_prepare_message", timeout=None, gateway=gateway, turn=turn)
        return prepared if isinstance(prepared, PreparedMessage | Reply) else None

    async def context_sections(self, gateway: Services, turn: Turn) -> list[ContextSection]:
        """Every plugin's sections, flattened (a plugin may return one section or a list)."""
        sections: list[ContextSection] = []
        for result in await self._call.call_all("gateway_context_sections", gateway=gateway, turn=turn):
            if isinstance(result, ContextSection):
                sections.append(result)
            else:
                sections.extend(s for s in result if isinstance(s, ContextSection))
        return sections

    async def briefing_sections(self, gateway: Services, user_id: str, now: datetime) -> list[BriefingSection]:
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
    async def before_llm_call(self, gateway: Services, turn: Turn, request: LLMRequest) -> LLMRequest | None:
        replaced = await self._call.call_first("gateway_before_llm_call", gateway=gateway, turn=turn,
                                               request=request)  # fmt: skip
        return replaced if isinstance(replaced, LLMRequest) else None

    async def llm_call(self, gateway: Services, turn: Turn | None, request: LLMRequest,
                       on_delta: Callable[[str], Any] | None) -> LLMResponse | None:  # fmt: skip
        """Not bounded by the hook timeout (``llm.timeout_s`` is the provider's); a failure is loud."""
        response = await self._call.call_first("gateway_llm_call", isolate=False, timeout=None, gateway=gateway,
                                               turn=turn, request=request, on_delta=on_delta)  # fmt: skip
        return response if isinstance(response, LLMResponse) else None

    # ------------------------------------------------------------------------------------- outbound
    async def render_reply(self, gateway: Services, turn: Turn, response: LLMResponse) -> Reply | None:
        reply = await self._call.call_first("gateway_render_reply", gateway=gateway, turn=turn, response=response)
        return reply if isinstance(reply, Reply) else None

    # ---------------------------------------------------------------------------------------- after
    async def after_turn(self, gateway: Services, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
        await self._call.call_all("gateway_after_turn", gateway=gateway, turn=turn, reply=reply, response=response)

    async def flush(self, gateway: Services) -> None:
        await self._call.call_all("gateway_flush", timeout=None, gateway=gateway)

    async def turn_error(self, gateway: Services, turn: Turn, error: BaseException) -> None:
        await self._call.call_all("gateway_turn_error", gateway=gateway, turn=turn, error=error)

    # ---------------------------------------------------------------------------------------- tools
    async def before_tool_call(self, gateway: Services, turn: Turn, call: ToolCall) -> str | None:
        """The veto reason, or None. A plugin that raises propagates: the caller refuses the call."""
        veto = await self._call.call_first("gateway_before_tool_call", isolate=False, gateway=gateway, turn=turn,
                                           call=call)  # fmt: skip
        return veto if isinstance(veto, str) and veto else None
