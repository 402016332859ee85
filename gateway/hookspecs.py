"""Every hook the host calls, grouped by lifecycle stage.

Rules that hold for all hooks:

* Arguments are keyword-only; an implementation may accept any subset of them.
* Implementations may be ``async def``; the host awaits them (see ``gateway.hookcall``).
* "all" hooks are called for every implementation; a failure or timeout in one is logged with the
  plugin's name and the others still run. "first" hooks stop at the first non-``None`` awaited
  result; the built-in default is registered ``trylast`` so any plugin overrides it.
* Every call is bounded by ``plugins.hook_timeout_s`` unless the hook's docstring says otherwise.
* The host calls each hook through its typed method on ``gateway.hooks`` (``gateway/hooks.py``).
* The registration hooks (adapters, jobs, tools, commands, HTTP routes) get a typed registry as ``register`` and the
  configuration; they run once, in ``Gateway.start`` after ``gateway_configure``. One policy for all
  of them (``gateway/registry.py``): entries are attributed to their plugin, and every problem (a name
  registered twice, a bad entry, a plugin raising) refuses startup, all reported in one ``ConfigError``.
  ``gateway_register_channels`` follows the same policy but takes no configuration: it runs while a
  config is read, to validate ``channels.<name>`` (``gateway.channels``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from datetime import datetime

    from gateway.adapter import AdapterRegistry
    from gateway.bus.registry import JobRegistry
    from gateway.channels import ChannelRegistry
    from gateway.config import Config
    from gateway.delivery.sections import BriefingSection
    from gateway.http.api.registry import RouteRegistry
    from gateway.services import Services
    from gateway.tools import ToolRegistry
    from gateway.turn.command_registry import CommandRegistry
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

PROJECT = "kith"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---------------------------------------------------------------------------------------- bootstrap


@hookspec(historic=True)
def gateway_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add new hookspecs (``pluginmanager.add_hookspecs(module)``). Rule: historic, all, sync."""


@hookspec(historic=True)
def gateway_configure(config: Config) -> None:
    """Validate the plugin's own config (``config.extensions[name]``) and keep what it needs.

    Rule: historic, all, sync. Raise ``gateway.config.ConfigError`` to refuse startup with a reason.
    """


# ---------------------------------------------------------------------------------------- lifecycle


@hookspec
def gateway_startup(gateway: Services) -> None:
    """The gateway's state, store and bus are open; open your own clients. Rule: all, in order."""


@hookspec
def gateway_shutdown(gateway: Services) -> None:
    """Close what ``gateway_startup`` opened. Rule: all; runs even when startup partly failed."""


# ----------------------------------------------------------------------------------------- channels


@hookspec
def gateway_register_channels(register: ChannelRegistry) -> None:
    """``register(name, Model)`` for each channel the plugin provides: the section ``channels.<name>``
    is validated with ``Model`` (a ``gateway.channels.ChannelConfig``: unknown keys refused, its
    ``problems`` checks) whenever a config is read, with the host's sections, every problem at once.

    Rule: all, sync, no config (it is called while the config is being read), so the plugin's module
    must import no platform SDK. A name declared twice is a config error.
    """


@hookspec
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    """``register(AdapterClass)`` for each channel adapter (``gateway.adapter.Adapter``) the plugin
    provides. The host creates those whose channel is enabled in ``config.channels``.

    Rule: all, sync, once at startup. A name registered twice is a startup error.
    """


# ------------------------------------------------------------------------------------------ inbound


@hookspec(firstresult=True)
def gateway_filter_inbound(message: InboundMessage) -> Drop | None:
    """Return ``Drop(reason)`` to stop a message before it costs anything (bots, self, spam).

    Rule: first. Runs before access policy and dedupe.
    """


@hookspec(firstresult=True)
def gateway_check_access(gateway: Services, message: InboundMessage) -> AccessDecision | Drop | None:
    """Decide whether an untrusted sender may reach the model and memory.

    Rule: first. ``None`` from every plugin means deny: unknown senders are refused by default.
    Trusted messages (authenticated by their adapter) skip this hook.
    """


@hookspec(firstresult=True)
def gateway_resolve_identity(gateway: Services, message: InboundMessage) -> UserRef | None:
    """Map (channel, account id) to a user in the unified namespace. Rule: first; default trylast."""


@hookspec
def gateway_before_users_merge(gateway: Services, into: str, source: str) -> None:
    """User ``source`` is about to be merged into ``into`` (a link): flush anything buffered for
    ``source``. Rule: all, not bounded by the hook timeout."""


@hookspec
def gateway_users_merged(gateway: Services, into: str, source: str) -> None:
    """User ``source`` was merged into ``into``: its files now live under ``users/<into>/``.
    Derived data (indexes) should be rebuilt for ``into`` and purged for ``source``. Rule: all."""


@hookspec
def gateway_memory_edited(gateway: Services, user_id: str, paths: list[str]) -> None:
    """The person ``user_id`` changed their memory on purpose (``/remember``, ``/forget``, an undo):
    ``paths`` are the files of their root that changed. Anything that keeps a copy of those files
    (a session's profile snapshot) must drop it, so the next prompt does not carry a forgotten line.
    Rule: all."""


@hookspec(firstresult=True)
def gateway_handle_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
    """Answer a chat command (``/new``, ``/otr``, ``/link`` ...). Rule: first.

    Return a Reply to answer it without calling the model; ``None`` lets the next plugin try; a
    command no plugin answers is answered by the host as unknown (never sent to the model).
    """


@hookspec
def gateway_register_commands(register: CommandRegistry, config: Config) -> None:
    """``register(name, help_text)`` for each chat command the plugin answers in
    ``gateway_handle_command``: ``help_text`` is its ``/help`` entry, one or more lines each starting
    with a usage (``/remember TEXT: ...``). Rule: all, sync, once at startup; a name registered twice is
    a startup error.
    """


@hookspec
def gateway_conversation_changed(gateway: Services, user_id: str) -> None:
    """The person ``user_id``'s conversation state changed outside a model turn: a new session
    (``/new``), Off-The-Record on or off, another persona, a settings change. Clients showing that
    state (the WebSocket adapter's ``state`` frame) refresh it. Rule: all.
    """


# --------------------------------------------------------------------------------------------- turn


@hookspec(firstresult=True)
def gateway_handle_turn(gateway: Services, turn: Turn) -> Reply | None:
    """Run the whole turn and return the reply (``None`` = no reply, e.g. dropped).

    Rule: first; the default (``gateway.turn.protocol``) is trylast and calls, in order: filter -> access ->
    dedupe -> identity -> commands (answered without a session or a model) -> session -> context
    sections -> before_llm_call -> llm_call -> render_reply -> persist -> after_turn. Not bounded by
    the hook timeout (the LLM call is).
    """


@hookspec
def gateway_session_started(gateway: Services, turn: Turn, session: Session) -> None:
    """A new session began (idle gap, ``/new``, first contact). Rule: all."""


@hookspec(firstresult=True)
def gateway_prepare_message(gateway: Services, turn: Turn) -> PreparedMessage | Reply | None:
    """Take the message's attachments in, once its person and session are known and before it is
    recorded: return a ``PreparedMessage`` (its text replaces the message's in the transcript and
    the prompt; its images and attached text go to the model with this message only), a ``Reply``
    to answer without the model and without recording anything (a refused file), or ``None`` to
    leave the message as it is. Rule: first; not bounded by the hook timeout (reading a document or
    transcribing a voice note has its own time limits, ``gateway/media``). ``turn.otr`` says whether
    anything may be stored."""


# ------------------------------------------------------------------------------------------ context


@hookspec
def gateway_context_sections(gateway: Services, turn: Turn) -> list[ContextSection] | None:
    """Contribute system-prompt sections. Rule: all; the results are flattened, ordered and budgeted
    by ``gateway.turn.budget``. Read-only: no writes, no network calls that can hang."""


# ---------------------------------------------------------------------------------------------- llm


@hookspec(firstresult=True)
def gateway_before_llm_call(gateway: Services, turn: Turn, request: LLMRequest) -> LLMRequest | None:
    """Return a replacement request (e.g. add tools, switch model). Rule: first."""


@hookspec(firstresult=True)
def gateway_llm_call(
    gateway: Services, turn: Turn | None, request: LLMRequest, on_delta: Callable[[str], Any] | None
) -> LLMResponse | None:
    """Make the model call; stream text pieces to ``on_delta`` when given. Rule: first; the default
    calls the configured provider (trylast). Bounded by ``llm.timeout_s``, not the hook timeout.

    Every model call takes this path: turns (``turn`` set) and background jobs through
    ``gateway.model(role)`` (``turn`` is None; ``request.role`` names the role)."""



# ----------------------------------------------------------------------------------------- outbound


@hookspec(firstresult=True)
def gateway_render_reply(gateway: Services, turn: Turn, response: LLMResponse) -> Reply | None:
    """Turn the model response into a Reply split to the channel's limits. Rule: first."""



# -------------------------------------------------------------------------------------------- after


@hookspec
def gateway_after_turn(gateway: Services, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
    """The turn is persisted. Keep it fast: enqueue jobs keyed by turn id, no heavy I/O.

    Rule: all. Never called for Off-The-Record turns, so no plugin can persist or enqueue them by
    forgetting a check.
    """


@hookspec
def gateway_flush(gateway: Services) -> None:
    """Write out anything buffered now (batched log appends, counters).

    Rule: all, not bounded by the hook timeout. Called by ``Gateway.settle()`` (tests, benchmarks,
    ``kith context``) so background effects can be observed deterministically.
    """


@hookspec
def gateway_turn_error(gateway: Services, turn: Turn, error: BaseException) -> None:
    """The turn failed with ``error``; the user got an error notice. Rule: all."""


# --------------------------------------------------------------------------------------------- http


@hookspec
def gateway_register_routes(register: RouteRegistry, config: Config) -> None:
    """``register(Route(...))`` for each HTTP route the plugin serves (``gateway.http.api.spec.Route``:
    method, a path under ``/api/``, the pydantic models of its query, body and answer, its handler, and
    ``operator=True`` when only the operator may call it). The gateway mounts every registered route
    and lists it in the OpenAPI document (``GET /api/openapi.json``); the API's one operator check,
    validation and JSON errors apply to it as to the host's own routes.

    Rule: all, sync, once at startup. A route outside ``/api/``, without a handler or with models of
    the wrong base, or a method and path already served (by the host or another plugin), is a startup
    error.
    """


# --------------------------------------------------------------------------------------------- jobs


@hookspec
def gateway_briefing_sections(gateway: Services, user_id: str, now: datetime) -> list[BriefingSection] | None:
    """Contribute sections to a person's briefing (``plugins/briefing.py``): weather, a calendar.
    Rule: all; one section or a list; a failing or slow plugin's sections are left out, the briefing
    goes out. ``now`` is an aware UTC instant; the person's timezone is on their user record."""


@hookspec
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    """``register(handler, name=..., timeout=..., max_tries=..., cron=..., per_user=..., needs_index=...,
    concurrency=...)`` for background jobs; cron expressions come from ``config``.

    Rule: all, sync, once at startup. Handlers receive ``(ctx, payload)``; payloads carry ids, not text.
    An invalid spec or a name registered twice is a startup error.
    """


# -------------------------------------------------------------------------------------------- tools


@hookspec
def gateway_register_tools(register: ToolRegistry, config: Config) -> None:
    """``register(tool)`` for each model tool (``gateway.tools.Tool``) the plugin provides.

    Rule: all, sync, once at startup; a name registered twice is a startup error.

    A tool is offered to the model only from the context tier that loads its item (``gateway.turn.tiers``),
    never in group conversations when it touches a user's private memory, and never in
    Off-The-Record sessions when it writes.
    """


@hookspec(firstresult=True)
def gateway_before_tool_call(gateway: Services, turn: Turn, call: ToolCall) -> str | None:
    """Veto a tool call the model made: return the reason (a string the model reads); ``None`` allows it.

    Rule: first. Runs before every call, after the host's own checks (tier, OTR, group).
    """
