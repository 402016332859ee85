"""Core value types shared by the host, adapters and plugins.

Everything that crosses a hook boundary is a frozen dataclass: hooks return new values instead of
mutating shared objects, so one plugin can never change what another one sees.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class ConversationKind(enum.StrEnum):
    DM = "dm"
    GROUP = "group"


class AccessDecision(enum.StrEnum):
    """A policy lets a message through with ``ALLOW``; a refusal is a ``Drop`` (with its reason)."""

    ALLOW = "allow"


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    kind: str  # photo | voice | audio | video | document | sticker | other
    name: str = ""
    mime_type: str = ""
    size: int = 0
    platform_id: str = ""
    url: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundMessage:
    """A platform event normalized by an adapter.

    ``trusted`` is set only by adapters that authenticated the sender themselves (the WebSocket
    gateway after token or loopback auth). Untrusted messages must pass the access policy.
    """

    channel: str  # adapter name: websocket | telegram | discord | nextcloud
    account_id: str  # the sender's immutable platform id
    text: str
    conversation_id: str = ""  # room / chat / guild channel; for DMs usually the account id
    kind: ConversationKind = ConversationKind.DM
    display_name: str = ""
    message_id: str = ""  # platform message id, the dedupe key together with channel
    timestamp: datetime | None = None
    attachments: tuple[Attachment, ...] = ()
    mentioned: bool = False  # the bot was @mentioned or replied to (group gating)
    reply_to: str = ""
    trusted: bool = False
    raw: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def conversation_key(self) -> str:
        return f"{self.channel}:{self.conversation_id or self.account_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRef:
    """A person in the unified namespace; ``user_id`` names ``users/<user_id>/``."""

    user_id: str
    display_name: str = ""
    timezone: str = "UTC"
    tier: int | None = None  # the person's own context tier (settings); None: the configured default


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    session_id: str
    user_id: str
    scope: str  # "user" (shared across channels) or "<channel>" (per-channel scope)
    conversation_key: str
    started_at: datetime
    last_active_at: datetime
    otr: bool = False
    is_new: bool = False  # created by this turn
    persona: str = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """An image sent to the model with a message; each provider renders it in its own format."""

    mime_type: str  # image/png, image/jpeg, image/gif, image/webp
    data: bytes
    name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryMessage:
    role: str  # "user" | "assistant"
    content: str
    timestamp: datetime | None = None
    turn_id: str = ""
    images: tuple[ImagePart, ...] = ()  # set on the current user message only (media plugin)


class Stability(enum.StrEnum):
    """Stable sections change rarely and go first so the prompt cache covers them."""

    STABLE = "stable"
    VOLATILE = "volatile"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSection:
    """One block of the system prompt contributed by a plugin.

    ``priority``: higher is placed earlier within its stability class. ``budget``: token cap for this
    section (0 = no cap of its own). ``trim_rank``: when the total budget overflows, sections with the
    lowest trim_rank are cut first; ``protected`` sections are never trimmed.
    """

    source: str
    title: str
    text: str
    priority: int = 50
    budget: int = 0
    stability: Stability = Stability.VOLATILE
    trim_rank: int = 50
    protected: bool = False
    as_data: bool = False  # render as quoted data, never as instructions


class StashKey(Generic[T]):
    """Typed key for plugin state: per turn (``turn.stash[KEY]``) or per gateway (``gateway.stash[KEY]``).

    Declare one per thing kept, at module level, typed with what it holds (``KEY = StashKey[int]()``):
    the key's identity is the name, so two plugins can never collide on a string.
    """

    __slots__ = ()


class Stash:
    """State keyed by ``StashKey``: a turn's (lives as long as the turn) or a gateway's (lives as long
    as the gateway, so two gateways in one process, tests or a worker next to a daemon, never share)."""

    def __init__(self) -> None:
        self._data: dict[StashKey[Any], Any] = {}

    def __setitem__(self, key: StashKey[T], value: T) -> None:
        self._data[key] = value

    def __getitem__(self, key: StashKey[T]) -> T:
        return self._data[key]  # type: ignore[no-any-return]

    def get(self, key: StashKey[T], default: T | None = None) -> T | None:
        return self._data.get(key, default)

    def setdefault(self, key: StashKey[T], default: T) -> T:
        """The value at ``key``, after storing ``default`` there when there was none."""
        return self._data.setdefault(key, default)  # type: ignore[no-any-return]

    def pop(self, key: StashKey[T], default: T | None = None) -> T | None:
        return self._data.pop(key, default)  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        return key in self._data


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedMessage:
    """A message with its attachments taken in (``gateway_prepare_message``).

    ``text`` replaces the message's text: what the transcript keeps and the model reads (Markdown
    links to the stored files, a voice note's transcript). ``attached`` is the text read from
    documents, and ``images`` the pictures: both go to the model with this message only.
    """

    text: str
    attached: str = ""
    images: tuple[ImagePart, ...] = ()


@dataclass(slots=True, kw_only=True)
class Turn:
    """One inbound message on its way through the pipeline.

    Not frozen: the pipeline fills ``user`` and ``session`` as it resolves them. Plugins read it
    and keep their own state in ``stash``.
    """

    turn_id: str
    message: InboundMessage
    received_at: datetime
    user: UserRef | None = None
    session: Session | None = None
    history: tuple[HistoryMessage, ...] = ()
    tier: int | None = None
    stash: Stash = field(default_factory=Stash)
    prepared: PreparedMessage | None = None  # attachments taken in (gateway_prepare_message)

    @property
    def otr(self) -> bool:
        return bool(self.session and self.session.otr)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as the model sees it: name, what it does, and a JSON Schema for its input."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """The model asked to run a tool (Anthropic ``tool_use`` block)."""

    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What went back to the model for one ToolCall. ``is_error`` results explain a refusal or failure."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


ToolRunner = Callable[[ToolCall], Awaitable[ToolResult]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFormat:
    """An answer asked for as one JSON object matching ``schema`` (a JSON Schema object), named
    ``name``. Providers that can enforce it do (OpenAI-compatible ``response_format: json_schema``,
    Anthropic a forced tool call) and answer with the object's JSON as the text; the others answer as
    the prompt says, so a caller always parses the text tolerantly (docs/models.md)."""

    name: str  # [A-Za-z0-9_-], as both APIs want a schema's / tool's name
    schema: Mapping[str, Any]
    description: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMRequest:
    """``tools`` are offered to the model; a provider that supports tools runs each call through
    ``run_tool`` and asks again, for at most ``max_tool_rounds`` rounds. Providers without tool support
    ignore both. ``response_format``: the answer as JSON of a schema, where the provider can enforce
    it (never together with tools)."""

    system: tuple[ContextSection, ...]
    messages: tuple[HistoryMessage, ...]
    model: str = ""
    max_tokens: int = 1024
    role: str = "main"  # model role: main | cheap | vision | transcription | any configured name
    stream: bool = True
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    tools: tuple[ToolSpec, ...] = ()
    run_tool: ToolRunner | None = None
    max_tool_rounds: int = 4
    response_format: ResponseFormat | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMResponse:
    text: str
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop_reason: str = ""
    provider: str = ""
    tool_calls: tuple[ToolCall, ...] = ()  # every call the model made during this response, in order
    tool_results: tuple[ToolResult, ...] = ()  # their results, same order
    rounds: int = 1  # model calls made (1 + tool rounds)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What goes back to the conversation. ``chunks`` is already split to the channel's limit."""

    text: str
    chunks: tuple[str, ...] = ()
    turn_id: str = ""
    session_id: str = ""
    otr: bool = False
    notice: bool = False  # a system notice (command answer, config hint), not a model reply
    delivery_id: str = ""  # a proactive message's outbox row: clients that acknowledge name it back
    stopped: bool = False  # the person stopped the model: ``text`` is what was shown, marked (gateway/turn/stop.py)
    model_error: bool = False  # the model call failed: the message was not kept, sending it again retries


@dataclass(frozen=True, slots=True, kw_only=True)
class Drop:
    """Returned by an inbound filter or access policy to stop a message, with the reason logged."""

    reason: str
    reply: str = ""  # optional text sent back (e.g. a pairing code)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationAddress:
    """Enough to reach a conversation outside a turn (proactive messages)."""

    channel: str
    conversation_id: str
    kind: ConversationKind = ConversationKind.DM
    user_id: str = ""
    persona: str = "default"
