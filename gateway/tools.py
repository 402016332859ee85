"""Model tools: the registry, which tools a turn offers, and the runner the LLM provider calls.

Plugins register ``Tool`` objects through ``gateway_register_tools(register)``, collected once when the
gateway starts (``gateway.stash[TOOLS]``). For each turn the host offers only the tools that
turn may use:

* the turn's context tier loads the tool's item (``gateway.turn.tiers.loads``): a tier-1 turn gets no
  memory tools, scratchpad and tasks need tier 4;
* a tool that touches the speaker's private memory (``private``) is never offered in a group
  conversation, where other people read the answers;
* a tool that writes (``writes``) is never offered in an Off-The-Record session: OTR reads memory but
  writes nothing.

The runner checks the same rules again when the model calls a tool (a model can name a tool it was
not offered), asks ``gateway_before_tool_call`` for a veto, and turns every failure into an error
result the model can read: a tool never fails the turn.

A tool that acts on the world (``needs_approval``: create or cancel an event, send a message) is not
run when the model calls it: its ``preview`` checks the input and says what exactly will happen, the
call waits in ``gateway.approvals`` and the model is told to ask the person, whose ``/approve ID``
runs it (``run_approved``) with this turn's gates checked again. kith posts the request itself as a
host notice (buttons where the platform has them); a tool the person made always allowed runs at once.

A rarely used tool (``deferred``) is not in the request: the ``more_tools`` catalogue names it, gives its
schema and runs it through ``run_tool`` on demand. ``describe`` gives a tool a description per turn (the
``skill`` tool's catalogue), or keeps it out of that turn.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gateway.approvals import APPROVALS, Approvals, Pending, always_allowed, set_always
from gateway.memory.files.errors import MemoryStoreError
from gateway.registry import Registry
from gateway.turn.tiers import TIER_OF_ITEM, loads, tier_of
from gateway.types import (
    ConversationAddress,
    ConversationKind,
    Reply,
    StashKey,
    ToolCall,
    ToolResult,
    ToolRunner,
    ToolSpec,
    Turn,
)

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore
    from gateway.services import Services

log = logging.getLogger("kith.tools")

MAX_RESULT_CHARS = 16_000  # a tool result is prompt tokens in the next round; keep one bounded
_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


class ToolError(Exception):
    """Raised by a handler to answer the model with an error it can act on (the message is shown)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a handler gets besides the model's input: the gateway, the turn and the speaker."""

    gateway: Services
    turn: Turn
    tier: int
    user_id: str

    @property
    def store(self) -> MemoryStore:
        """The speaker's memory root, through the guarded store (containment, caps, audit)."""
        return self.gateway.memory_store(self.user_id)

    @property
    def message_id(self) -> str:
        return self.turn.turn_id


ToolHandler = Callable[[ToolContext, Mapping[str, Any]], Awaitable[str] | str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    handler: ToolHandler
    # The tier item that gates it (gateway.turn.tiers.TIER_OF_ITEM); "" = the tool's own name when that is an
    # item, else ``min_tier`` (third-party tools need no entry in kith's table).
    item: str = ""
    min_tier: int = 2
    writes: bool = False  # changes memory: never in Off-The-Record sessions
    private: bool = True  # reads or writes the speaker's own memory: never in group conversations
    available: Callable[[Services], bool] | None = None  # e.g. needs the memory index or the job bus
    timeout_s: float = 15.0
    plugin: str = ""
    # Per person: e.g. they connected a calendar (``available`` is for the whole gateway).
    usable: Callable[[Services, str], bool] | None = None
    needs_approval: bool = False  # acts on the world: runs only after the person's /approve (gateway.approvals)
    preview: ToolHandler | None = None  # for needs_approval: check the input, say what will happen
    # Per turn: this turn's description (e.g. the skills of the persona speaking); None = not offered.
    describe: Callable[[Services, Turn], str | None] | None = None
    # Rarely used: its schema is not in the request; the ``more_tools`` catalogue names it with ``summary``
    # (default: the description's first sentence) and loads and runs it on demand, behind the same gates.
    deferred: bool = False
    summary: str = ""

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > 64 or not set(self.name) <= _NAME_OK:
            raise ValueError(f"tool name {self.name!r} must be 1-64 of [a-z0-9_-]")
        if self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must be a JSON Schema of type 'object'")
        if self.item:
            loads(4, self.item)  # an unknown tier item fails at registration, not mid-turn
        if self.needs_approval and self.preview is None:
            raise ValueError(f"tool {self.name!r}: needs_approval needs a preview (what the person approves)")

    def loads_at(self, tier: int) -> bool:
        if self.item:
            return loads(tier, self.item)
        if self.name in TIER_OF_ITEM:
            return loads(tier, self.name)
        return tier >= self.min_tier

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, input_schema=self.input_schema)

    def short(self) -> str:
        """One line for the ``more_tools`` catalogue."""
        if self.summary:
            return self.summary
        first = self.description.split(". ", 1)[0].rstrip(".")
        return first if len(first) <= 100 else first[:99] + "…"


class ToolRegistry(Registry[Tool]):
    """The ``register`` handed to ``gateway_register_tools``: ``register(tool)``, each tool attributed to
    its plugin (``Tool.plugin``). Two plugins answering to one name would make the model's calls
    ambiguous: a duplicate refuses startup (gateway/registry.py)."""

    kind = "tool"

    def __call__(self, tool: Tool) -> None:
        if not isinstance(tool, Tool):
            self.problem(f"registered {tool!r}, not a gateway.tools.Tool")
            return
        self.add(tool.name, replace(tool, plugin=self.plugin))


#: What plugins registered, in the gateway's stash (set in ``Gateway.start``): modules typed against
#: ``gateway.services.Services`` read it here.
TOOLS = StashKey[ToolRegistry]()


def refusal(gateway: Services, turn: Turn, tool: Tool, tier: int) -> str:
    """Why ``tool`` may not run in ``turn`` ("" = it may)."""
    if turn.user is None:
        return "no user is known for this conversation"
    if not tool.loads_at(tier):
        return f"{tool.name} is not available at context tier {tier}"
    if tool.private and turn.message.kind is ConversationKind.GROUP:
        return f"{tool.name} works on the speaker's private memory and is not available in group conversations"
    if tool.writes and turn.otr:
        return f"{tool.name} writes memory, and this conversation is Off-The-Record: nothing is stored"
    if tool.available is not None and not tool.available(gateway):
        return f"{tool.name} is not available right now"
    if tool.usable is not None and not tool.usable(gateway, turn.user.user_id):
        return f"{tool.name} is not set up for this person"
    return ""


def offered(gateway: Services, turn: Turn) -> list[Tool]:
    """The tools this turn may use, sorted by name (a stable list keeps the prompt cache warm), each with
    this turn's description; deferred ones included (``toolset`` puts them behind ``more_tools``)."""
    tools = gateway.stash[TOOLS]
    if not tools:
        return []
    tier = tier_of(gateway, turn)
    out = []
    for _, tool in sorted(tools.items()):
        if refusal(gateway, turn, tool, tier):
            continue
        if tool.describe is not None:
            try:
                text = tool.describe(gateway, turn)
            except Exception:
                log.exception("describing tool %s (plugin %s) failed; not offered", tool.name, tool.plugin)
                continue
            if text is None:
                continue
            tool = replace(tool, description=text)
        out.append(tool)
    return out


@dataclass(frozen=True, slots=True)
class Toolset:
    specs: tuple[ToolSpec, ...]
    run: ToolRunner | None


MORE_TOOLS = "more_tools"


def toolset(gateway: Services, turn: Turn) -> Toolset:
    """What ``build_request`` puts into the LLMRequest for this turn: the tools offered, the deferred
    ones behind one ``more_tools`` catalogue."""
    tools = offered(gateway, turn)
    if not tools:
        return Toolset((), None)
    by_name = {t.name: t for t in tools}
    later = [t for t in tools if t.deferred]
    direct = [t for t in tools if not t.deferred]
    if later and MORE_TOOLS not in by_name:
        direct.append(catalogue_tool(later))
        by_name[MORE_TOOLS] = direct[-1]

    async def run(call: ToolCall) -> ToolResult:
        return await run_tool(gateway, turn, by_name, call)

    return Toolset(tuple(t.spec() for t in direct), run)


def catalogue_tool(later: list[Tool]) -> Tool:
    """``more_tools``: the deferred tools by name and one line each; ``{tool}`` returns one's description
    and parameters, ``{tool, input}`` runs it through ``run_tool`` (every gate, veto and approval of a
    tool offered directly). Its schema is paid on every turn; theirs only when one is needed."""
    names = {t.name: t for t in later}
    lines = "\n".join(f"- {t.name}: {t.short()}" for t in later)

    async def more_tools(ctx: ToolContext, args: Mapping[str, Any]) -> str:
        name = args.get("tool")
        tool = names.get(name) if isinstance(name, str) else None
        if tool is None:
            raise ToolError(f"no such tool {name!r}; these are: {', '.join(names)}")
        given = args.get("input")
        if given is None:
            schema = json.dumps(dict(tool.input_schema), ensure_ascii=False, separators=(",", ":"))
            return (f"{tool.name}: {tool.description}\nInput (JSON Schema): {schema}\n"
                    f"Call more_tools with tool={tool.name!r} and this input to use it.")
        if not isinstance(given, Mapping):
            raise ToolError("input must be a JSON object")
        result = await run_tool(ctx.gateway, ctx.turn, names, ToolCall(id=f"{MORE_TOOLS}:{name}", name=tool.name,
                                                                      input=given))  # fmt: skip
        if result.is_error:
            raise ToolError(result.content)
        return result.content

    return Tool(
        name=MORE_TOOLS,
        description=f"More tools. Call with tool to see its input, then with tool and input to use it:\n{lines}",
        input_schema={"type": "object", "properties": {"tool": {"type": "string"}, "input": {"type": "object"}},
                      "required": ["tool"]},
        handler=more_tools, min_tier=1, private=False, timeout_s=max(t.timeout_s for t in later) + 5,
        plugin="gateway.tools",
    )


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=message, is_error=True)


def _missing_required(schema: Mapping[str, Any], args: Mapping[str, Any]) -> list[str]:
    return [k for k in schema.get("required", ()) if k not in args]


async def run_tool(gateway: Services, turn: Turn, tools: Mapping[str, Tool], call: ToolCall) -> ToolResult:
    """Run one call the model made. Never raises: every failure is an error result for the model."""
    tool = tools.get(call.name)
    if tool is None:
        return _error(call, f"unknown tool {call.name!r}; available: {', '.join(sorted(tools)) or 'none'}")
    tier = tier_of(gateway, turn)
    why = refusal(gateway, turn, tool, tier)
    if why:
        return _error(call, why)
    if not isinstance(call.input, Mapping):
        return _error(call, "the tool input must be a JSON object")
    missing = _missing_required(tool.input_schema, call.input)
    if missing:
        return _error(call, f"missing required input: {', '.join(missing)}")
    try:
        veto = await gateway.hooks.before_tool_call(gateway, turn, call)
    except Exception:
        # A policy plugin that crashes must not turn into "allowed".
        log.exception("gateway_before_tool_call failed for %s; refusing the call", call.name)
        return _error(call, "the call was refused: a policy check failed")
    if veto is not None:
        log.info("tool call %s vetoed: %s", call.name, veto)
        return _error(call, f"the call was refused: {veto}")
    assert turn.user is not None  # refusal() checked it
    ctx = ToolContext(gateway=gateway, turn=turn, tier=tier, user_id=turn.user.user_id)
    if tool.needs_approval:
        return await _ask_approval(gateway, tool, ctx, call)
    return await _invoke(tool, ctx, call, tool.handler)


async def _invoke(tool: Tool, ctx: ToolContext, call: ToolCall, handler: ToolHandler) -> ToolResult:
    try:
        async with asyncio.timeout(tool.timeout_s):
            out = handler(ctx, call.input)
            if inspect.isawaitable(out):
                out = await out
    except ToolError as exc:
        return _error(call, str(exc))
    except MemoryStoreError as exc:
        return _error(call, f"{type(exc).__name__}: {exc}")
    except TimeoutError:
        log.warning("tool %s timed out after %.1fs", call.name, tool.timeout_s)
        return _error(call, f"{call.name} timed out")
    except Exception:
        log.exception("tool %s (plugin %s) failed", call.name, tool.plugin)
        return _error(call, f"{call.name} failed; the error is logged")
    text = str(out)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[... cut at {MAX_RESULT_CHARS} characters]"
    log.info("tool %s ran for turn %s (%d chars)", call.name, ctx.turn.turn_id, len(text))
    return ToolResult(call_id=call.id, name=call.name, content=text)


def approvals(gateway: Services) -> Approvals:
    """The gateway's approvals, auditing into its state database (made once: making it sweeps)."""
    book = gateway.stash.get(APPROVALS)
    if book is None:
        cfg = gateway.config.tools
        book = gateway.stash[APPROVALS] = Approvals(ttl_s=cfg.approval_ttl_s, store=gateway.state.approval_audit,
                                                    retention_days=cfg.approval_audit_days)  # fmt: skip
        book.sweep()
    return book


async def _ask_approval(gateway: Services, tool: Tool, ctx: ToolContext, call: ToolCall) -> ToolResult:
    """Check the input and park the call; the model is told to ask the person."""
    assert tool.preview is not None  # Tool.__post_init__
    checked = await _invoke(tool, ctx, call, tool.preview)
    if checked.is_error:
        return checked
    if tool.name in always_allowed(gateway.config.data_dir, ctx.user_id):  # the person said so (/approve ID always)
        book = approvals(gateway)
        entry = Pending(approval_id="always", user_id=ctx.user_id, tool=tool.name, args={}, summary=checked.content,
                        expires_at=0.0)  # fmt: skip
        book.record(entry, "always allowed")
        result = await _invoke(tool, ctx, call, tool.handler)
        book.record(entry, "failed" if result.is_error else "done")
        return result
    pending = approvals(gateway).request(user_id=ctx.user_id, tool=tool.name, args=call.input, summary=checked.content)
    minutes = max(1, round(approvals(gateway).ttl_s / 60))
    shown = await _show_request(gateway, ctx.turn, pending.approval_id, pending.summary, minutes)
    told = ("The person was shown this request with Approve and Deny. Tell them in a few words what waits, and"
            if shown else "Tell them exactly this and")
    text = (f"NOT DONE YET: this needs the person's approval. {told} that they can answer "
            f"/approve {pending.approval_id} or /deny {pending.approval_id} (expires in {minutes} min):\n"
            f"{pending.summary}")
    return ToolResult(call_id=call.id, name=call.name, content=text)


def request_text(approval_id: str, summary: str, minutes: int) -> str:
    """The host's own approval request: what will happen, in the tool's words, not the model's. Its last
    line is what ``gateway.delivery.buttons.offered`` turns into Approve and Deny buttons."""
    return (f"Approval needed (expires in {minutes} min):\n{summary}\n"
            f"Approve with /approve {approval_id} or /deny {approval_id}")


async def _show_request(gateway: Services, turn: Turn, approval_id: str, summary: str, minutes: int) -> bool:
    """Send the request to the conversation as a host notice (buttons where the platform has them, a
    card in the web chat, the typed commands everywhere). False when it could not be sent: the model's
    answer carries it then."""
    from gateway.util.text import split_text

    msg = turn.message
    assert turn.user is not None
    text = request_text(approval_id, summary, minutes)
    address = ConversationAddress(channel=msg.channel, conversation_id=msg.conversation_id or msg.account_id,
                                  kind=msg.kind, user_id=turn.user.user_id,
                                  persona=turn.session.persona if turn.session is not None else "default")  # fmt: skip
    reply = Reply(text=text, chunks=tuple(split_text(text, gateway.message_limit(msg.channel))), notice=True,
                  otr=turn.otr)  # fmt: skip
    try:
        await gateway.send(address, reply)
    except Exception as exc:  # no live connection (a web chat closed, a test without the adapter)
        log.info("approval %s: the request could not be shown in %s (%s)", approval_id, msg.channel,
                 type(exc).__name__)  # fmt: skip
        return False
    return True


async def run_approved(gateway: Services, turn: Turn, approval_id: str, *, always: bool = False) -> tuple[bool, str]:
    """``/approve ID`` from ``turn``'s speaker: run the parked call if it is theirs and still pending,
    with the gates checked again for the approving turn (no approving from a group or OTR when the tool
    may not run there); with ``always``, the tool is always allowed for them from then on. (done, what
    to tell the person)."""
    if turn.user is None:
        return False, "no user is known for this conversation"
    book = approvals(gateway)
    pending, why = book.take(approval_id, turn.user.user_id)
    if pending is None:
        return False, why
    registered = gateway.stash.get(TOOLS)
    tool = registered.get(pending.tool) if registered is not None else None
    if tool is None:
        book.record(pending, "refused", note="the tool is gone")
        return False, f"{pending.tool} is no longer available"
    tier = tier_of(gateway, turn)
    why = refusal(gateway, turn, tool, tier)
    # A command turn has no session, so ``turn.otr`` cannot say it: ask the sessions.
    if not why and tool.writes and gateway.sessions.is_otr(turn.user, turn.message):
        why = f"{tool.name} writes, and this conversation is Off-The-Record: nothing is stored"
    if why:
        book.record(pending, "refused", note="not allowed in this conversation")
        return False, why
    ctx = ToolContext(gateway=gateway, turn=turn, tier=tier, user_id=turn.user.user_id)
    call = ToolCall(id=f"approval-{pending.approval_id}", name=tool.name, input=pending.args)
    try:  # the policy may have changed while the call waited
        veto = await gateway.hooks.before_tool_call(gateway, turn, call)
    except Exception:
        log.exception("gateway_before_tool_call failed for approved %s; refusing the call", call.name)
        veto = "a policy check failed"
    if veto is not None:
        book.record(pending, "refused", note="a policy refused it")
        return False, f"the call was refused: {veto}"
    book.record(pending, "approved")
    if always:
        set_always(gateway.config.data_dir, turn.user.user_id, tool.name, True)
    result = await _invoke(tool, ctx, call, tool.handler)
    book.record(pending, "failed" if result.is_error else "done")
    return not result.is_error, result.content


def deny(gateway: Services, turn: Turn, approval_id: str) -> str:
    if turn.user is None:
        return "no user is known for this conversation"
    book = approvals(gateway)
    pending, why = book.take(approval_id, turn.user.user_id)
    if pending is None:
        return why
    book.record(pending, "denied")
    return f"Denied; nothing was done: {pending.summary}"
