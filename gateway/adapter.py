"""The contract every channel adapter implements, and the registry adapters are registered in.

The contract belongs to the host: the gateway and its supervisor know adapters only through it, and
the adapters (``adapters/``, third-party plugins) implement it; nothing in ``gateway/`` imports an
adapter (tests/core/test_import_rules.py).

An adapter turns platform events into ``InboundMessage`` values, hands them to
``gateway.handle_inbound`` and delivers the reply. The host supervises it (``gateway.supervisor``):
``run`` is started in a named task; if it returns or raises, the supervisor restarts it with capped,
jittered exponential backoff, except after ``AdapterAuthError``, which stops only this adapter.
``run`` calls ``mark_connected()`` once it is connected and serving: until then health says
``starting``, so ``/healthz`` never reports an adapter running while it is still connecting.

A platform that can edit messages streams a reply as the model writes it: run the turn through
``gateway.delivery.stream.streamed_turn`` with a ``StreamedReply`` over the platform's post, edit and
delete (the built-in Telegram, Discord, Matrix, Slack and Nextcloud Talk adapters show how). A platform with
buttons offers the host's confirmations through ``gateway.delivery.buttons``.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from aiohttp import web

from gateway.media.errors import AttachmentUnavailable
from gateway.registry import Registry
from gateway.types import Attachment, ConversationAddress, Reply
from gateway.util.text import split_text

if TYPE_CHECKING:
    from gateway.services import Services


class AdapterAuthError(Exception):
    """The platform rejected our credentials: retrying will not help, stop this adapter."""


class AdapterStalled(Exception):
    """Raised by the watchdog when an adapter stopped receiving; the supervisor restarts it."""


class Adapter(abc.ABC):
    name: ClassVar[str]
    #: Longest text the platform accepts in one message; replies are split to fit.
    max_message_chars: ClassVar[int] = 4000
    #: Seconds without any platform activity after which the watchdog restarts ``run`` (0 = never).
    stall_after_s: ClassVar[float] = 0.0

    def __init__(self, gateway: Services, config: Any = None) -> None:
        self.gateway = gateway
        self.config = config
        self.last_activity = time.monotonic()
        #: Set by the supervisor before each ``run``; ``mark_connected`` reports through it.
        self.on_connected: Callable[[], None] | None = None

    def mark_connected(self) -> None:
        """``run`` is connected to its platform and serving (a login answered, a socket listens)."""
        self.touch()
        if self.on_connected is not None:
            self.on_connected()

    def touch(self) -> None:
        """Record platform activity (a poll returned, a heartbeat ack, a webhook hit)."""
        self.last_activity = time.monotonic()

    @abc.abstractmethod
    async def run(self) -> None:
        """Connect and serve until cancelled. Return or raise to be restarted by the supervisor."""

    async def stop(self) -> None:  # noqa: B027 - optional override
        """Release platform resources; called on shutdown and before each restart.

        It may (and should) cancel the tasks awaiting ``gateway.handle_inbound``: on a restart the
        turn runs on in the gateway's own task and its reply is delivered after the restart
        (gateway/turn/inflight.py); on shutdown the turn ends with its handler."""

    @abc.abstractmethod
    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        """Deliver a reply (or a proactive message) to a conversation, in order, chunked."""

    def reply_chunks(self, reply: Reply) -> list[str]:
        """The reply's chunks, each within ``max_message_chars``.

        The host already split the reply for this adapter; a reply rendered for another limit (a
        proactive message, a plugin's own renderer) is re-split here, never truncated.
        """
        chunks = list(reply.chunks) or split_text(reply.text, self.max_message_chars)
        out: list[str] = []
        for chunk in chunks:
            out.extend(split_text(chunk, self.max_message_chars) if len(chunk) > self.max_message_chars else [chunk])
        return out

    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """The attachment's bytes, at most ``max_bytes`` of them.

        Raise ``gateway.media.errors.TooLarge`` past ``max_bytes`` (stop reading, never buffer the
        rest) and ``AttachmentUnavailable`` when the platform cannot hand the file over. The default
        is for channels without file download.
        """
        raise AttachmentUnavailable(f"the {self.name} channel cannot download attachments")

    async def send_file(self, address: ConversationAddress, *, name: str, mime_type: str, data: bytes) -> str:
        """Post a file to a conversation (the platform's upload, then its file message); the platform's
        id for what was posted. Raise ``AttachmentUnavailable`` when the platform refuses it. The
        default is for channels without file upload."""
        raise AttachmentUnavailable(f"the {self.name} channel cannot send files")

    def routes(self) -> list[web.RouteDef]:
        """HTTP routes (webhooks) mounted on the host's aiohttp application before it starts."""
        return []

    def health(self) -> dict[str, Any]:
        """Extra adapter-specific health fields merged into ``/healthz``."""
        return {}


class AdapterRegistry(Registry[type[Adapter]]):
    """The ``register`` handed to ``gateway_register_adapters``: ``register(AdapterClass)``, one name
    per channel (``Adapter.name``). The host creates the adapters whose channel is enabled."""

    kind = "adapter"

    def __call__(self, cls: type[Adapter]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Adapter)):
            self.problem(f"registered {cls!r}, not a subclass of gateway.adapter.Adapter")
            return
        name = getattr(cls, "name", "")
        if not isinstance(name, str) or not name:
            self.problem(f"adapter {cls.__qualname__} has no name")
            return
        self.add(name, cls)
