"""Streaming a reply by editing the message it is being written in (Telegram, Discord, ...).

An adapter whose platform can edit messages runs each turn through ``streamed_turn``: it passes
``StreamedReply.feed`` to ``handle_inbound`` as ``on_delta`` and, when the turn returns, calls
``finish`` with the reply's text (or ``abort`` when there is none), and delivers the reply the
ordinary way when nothing could be streamed. Meanwhile the reply
appears and grows: the first message is posted once there is enough text to be worth a
notification, then edited as the model writes. The platform is reached through three calls the
adapter implements (``MessageTarget``): post, edit, delete.

* **Throttled.** Two calls to the platform are at least ``interval_s`` apart (the platform's edit
  rate); text that arrives meanwhile is shown by the next edit, so a fast model means bigger steps,
  never more calls. A rate-limit answer (the adapter's ``retry_after`` extractor names the wait) pushes
  the next call back by that wait; then the text as it is by then goes out (while finishing: the same
  call is tried again).
* **Final text exact.** ``finish`` always makes the last call carry the reply as the turn returned it,
  even when a plugin changed it after the stream (a note appended, an error notice instead): what
  was streamed is then rewritten message by message, surplus messages deleted.
* **Stable splits.** Past the platform's limit the message in progress is sealed at the cut
  ``gateway.util.text.take_chunk`` makes and the text goes on in a new message. That cut depends only
  on text already there, so a sealed message is never re-split and the messages end as
  ``split_text`` of the whole reply would cut it.
* **Failure.** A call that fails (not a rate limit) stops the stream. ``finish`` still tries once to
  lay the final text over what was shown (the failure may have passed); if that fails too, it
  deletes the messages the stream posted and answers ``False``, and the reply is delivered the
  ordinary way: the person never reads a partial message above the whole one.

Clock and sleep are injectable so tests run the throttle without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pydantic import Field

from gateway.configtypes import Section
from gateway.delivery.handover import rescue
from gateway.types import Reply
from gateway.util.text import split_text, take_chunk

__all__ = ["MessageTarget", "StreamSettings", "StreamedReply", "StreamingOptions", "streamed_turn"]

log = logging.getLogger("kith.delivery.stream")

H = TypeVar("H")
T = TypeVar("T")


class MessageTarget(Protocol[H]):
    """The conversation a reply streams into, as the adapter reaches it. ``H``: the platform's handle
    of a message (a message id, a ``discord.Message``).

    ``drafts`` false: the message in progress is a real message, edited as it grows, and it is final
    once the last edit is made. ``drafts`` true (Telegram's ``sendMessageDraft``): the message in
    progress is a preview the platform does not keep; ``seal`` posts the kept message.
    """

    drafts: bool

    async def post(self, text: str) -> H: ...

    async def edit(self, handle: H, text: str) -> None: ...

    async def seal(self, handle: H | None, text: str) -> H:
        """Only with drafts: the kept message showing ``text`` (``handle``: the draft, if any)."""
        ...

    async def delete(self, handle: H) -> None: ...


@dataclass(frozen=True, slots=True)
class StreamSettings:
    interval_s: float = 1.0  # at least this long between two calls to the platform
    # The first message (and its notification) waits for this much text: "Hel" tells nobody anything.
    first_after_chars: int = 40
    max_retry_wait_s: float = 60.0  # a platform asking for a longer pause is waited on this long
    attempts: int = 5  # tries of one call that keeps being rate limited


class StreamingOptions(Section):
    """The keys a channel that streams by edits adds to its config section (``adapters/*_config.py``)."""

    stream: bool = True  # false: every reply arrives whole, as one message (or its chunks)
    # The platform's edit rate; a subclass sets its own default (Slack's chat.update allows less).
    stream_interval_s: float = Field(1.0, ge=0.01, le=60)
    stream_first_chars: int = Field(40, ge=1, le=1000)  # text the first message (its notification) waits for

    def stream_settings(self) -> StreamSettings:
        return StreamSettings(interval_s=self.stream_interval_s, first_after_chars=self.stream_first_chars)


class _Deferred(Exception):
    """A call while streaming was rate limited: the pump tries again later with fresher text."""


@dataclass(slots=True)
class _Posted(Generic[H]):
    handle: H
    text: str  # what the message shows now (source text; the adapter renders it)


class StreamedReply(Generic[H]):
    def __init__(
        self,
        target: MessageTarget[H],
        *,
        limit: int,
        retry_after: Callable[[BaseException], float | None],
        settings: StreamSettings = StreamSettings(),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        what: str = "stream",
    ) -> None:
        self._target, self._limit, self._retry_after = target, limit, retry_after
        self._settings, self._clock, self._sleep, self._what = settings, clock, sleep, what
        self._pieces: list[str] = []
        self._length = 0
        self._messages: list[_Posted[H]] = []
        self._sealed = 0  # messages before this index are complete chunks, never touched again
        self._offset = 0  # where the message in progress starts in the (left-stripped) text
        self._reopen = ""  # the code fence the message in progress reopens
        self._next_at = 0.0
        self._dirty = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._busy = False  # the pump is inside a call to the platform: let it finish, never cancel it
        self._closed = False
        self.failed: BaseException | None = None
        self.stats = {"posts": 0, "edits": 0, "deletes": 0, "rate_limited": 0}

    @property
    def started(self) -> bool:
        """Something is on the platform already."""
        return bool(self._messages)

    # ------------------------------------------------------------------------------ streaming
    def feed(self, piece: str) -> None:
        """``on_delta``: never waits (the model's stream must not), the pump does the calling."""
        if self._closed or self.failed is not None or not piece:
            return
        self._pieces.append(piece)
        self._length += len(piece)
        if self._pump is None:
            if self._length < self._settings.first_after_chars:
                return
            self._pump = asyncio.create_task(self._run(), name=f"{self._what}:pump")
        self._dirty.set()

    def _text(self) -> str:
        if len(self._pieces) > 1:
            self._pieces[:] = ["".join(self._pieces)]
        return self._pieces[0].lstrip() if self._pieces else ""

    async def _run(self) -> None:
        try:
            while not self._closed:
                await self._dirty.wait()
                await self._pace()  # what arrives meanwhile goes out with this call
                if self._closed:
                    return
                self._dirty.clear()
                self._busy = True
                try:
                    await self._render(self._text(), final=False)
                except _Deferred:
                    self._dirty.set()  # after the wait the platform asked for, with the text as it is then
                finally:
                    self._busy = False
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed = exc
            log.warning("%s: streaming stopped (%s: %s); the reply goes out whole", self._what,
                        type(exc).__name__, exc)

    async def _render(self, text: str, *, final: bool) -> None:
        """Show ``text``: seal every full chunk past the sealed ones, then the rest in progress."""
        while True:
            body, rest, reopen = take_chunk(text[self._offset :], self._limit, self._reopen)
            if not rest.strip():
                break
            # Something visible follows the cut, so the whitespace at it is all here already and
            # the cut is the one the whole reply gets.
            await self._seal(body)
            self._offset = len(text) - len(rest)
            self._reopen = reopen
        if final:
            if body or self._in_progress() is not None:
                await self._seal(body or "…")
        elif body:
            await self._show(body)

    def _in_progress(self) -> _Posted[H] | None:
        return self._messages[-1] if len(self._messages) > self._sealed else None

    async def _show(self, body: str) -> None:
        current = self._in_progress()
        if current is None:
            handle = await self._call(lambda: self._target.post(body))
            self._messages.append(_Posted(handle, body))
            self.stats["posts"] += 1
        elif current.text != body:
            await self._call(lambda: self._target.edit(current.handle, body))
            current.text = body
            self.stats["edits"] += 1

    async def _seal(self, body: str) -> None:
        """The message in progress (or a new one) is complete, showing ``body``."""
        if not self._target.drafts:
            await self._show(body)
        else:
            current = self._in_progress()
            draft = current.handle if current is not None else None
            handle = await self._call(lambda: self._target.seal(draft, body))
            self.stats["posts"] += 1
            if current is not None:
                self._messages.pop()
            self._messages.append(_Posted(handle, body))
        self._sealed = len(self._messages)

    async def _pace(self) -> None:
        wait = self._next_at - self._clock()
        if wait > 0:
            await self._sleep(wait)

    async def _call(self, op: Callable[[], Awaitable[T]]) -> T:
        """``op`` at its turn. Rate limited while streaming: ``_Deferred`` (the pump's next round sends
        the text as it is by then, not this stale one); while finishing: the same call, tried again."""
        settings = self._settings
        for attempt in range(1, settings.attempts + 1):
            await self._pace()
            try:
                result = await op()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                wait = self._retry_after(exc)
                if wait is None or attempt == settings.attempts:
                    raise
                self.stats["rate_limited"] += 1
                wait = min(max(wait, settings.interval_s), settings.max_retry_wait_s)
                log.info("%s: rate limited, next call in %.2fs", self._what, wait)
                self._next_at = self._clock() + wait
                if not self._closed:
                    raise _Deferred from None
                continue
            self._next_at = self._clock() + settings.interval_s
            return result
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------------------ finishing
    async def finish(self, text: str) -> bool:
        """Make the messages show ``text`` exactly (split at the limit). False: nothing was streamed,
        or the stream failed and what it had shown is withdrawn, and the caller delivers ``text`` the
        ordinary way."""
        await self._stop_pump()
        if not self._messages:
            return False
        final = text.strip()
        try:
            # After a failure midway, too: the failed call may have been a passing fault, and laying
            # the reply over the partial message is what the person should see.
            if final and final[: self._offset] == self._text()[: self._offset]:
                await self._render(final, final=True)
            else:
                await self._rewrite(final)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed = exc
            log.warning("%s: the final edit failed (%s: %s); the reply goes out whole", self._what,
                        type(exc).__name__, exc)
            await self._withdraw()
            return False
        if self.failed is not None:
            log.info("%s: the stream stopped midway, its messages were finished all the same", self._what)
        return True

    async def abort(self) -> None:
        """The turn ended without a reply: stop streaming (what was shown stays)."""
        await self._stop_pump()

    async def _stop_pump(self) -> None:
        self._closed = True
        pump = self._pump
        if pump is None:
            return
        if not self._busy:
            pump.cancel()  # it waits (for text or for its turn): nothing is half sent
        self._dirty.set()
        with contextlib.suppress(asyncio.CancelledError):
            await pump

    async def _withdraw(self) -> None:
        """The reply goes out whole: take back what was streamed, so the person does not read a partial
        message above the full one. A message that cannot be deleted stays (logged)."""
        posted, self._messages[:] = list(self._messages), []
        self._sealed = 0
        for message in posted:
            try:
                await self._call(lambda message=message: self._target.delete(message.handle))  # type: ignore[misc]
                self.stats["deletes"] += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("%s: a partial message stays above the whole reply (delete failed: %s)", self._what,
                            type(exc).__name__)

    async def _rewrite(self, final: str) -> None:
        """The reply is not what was streamed (changed after the stream): lay it over the messages."""
        chunks = split_text(final, self._limit) or ["…"]
        for i, chunk in enumerate(chunks):
            if i >= self._sealed:  # the message in progress, then new ones
                await self._seal(chunk)
                continue
            posted = self._messages[i]
            if posted.text != chunk:
                await self._call(lambda posted=posted, chunk=chunk: self._target.edit(posted.handle, chunk))  # type: ignore[misc]
                posted.text = chunk
                self.stats["edits"] += 1
        surplus = self._messages[len(chunks) :]
        del self._messages[len(chunks) :]
        for posted in surplus:
            try:
                await self._call(lambda posted=posted: self._target.delete(posted.handle))  # type: ignore[misc]
                self.stats["deletes"] += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the reply is complete above; a stale tail is cosmetic
                log.info("%s: could not delete a surplus message (%s)", self._what, type(exc).__name__)
        self._sealed = len(self._messages)


# ------------------------------------------------------------------------------------ the turn
OnDelta = Callable[[str], None]


async def streamed_turn(
    stream: StreamedReply[Any] | None,
    turn: Callable[[OnDelta | None], Awaitable[Reply | None]],
    deliver: Callable[[Reply], Awaitable[None]],
) -> tuple[Reply | None, bool]:
    """One streamed turn, the same on every platform: ``turn(on_delta)`` runs the turn (the adapter's
    ``handle_inbound`` call, with whatever it shows meanwhile); ``stream`` None (streaming off, not
    connected) runs it without deltas. A turn that ends without a reply (or raises) stops the
    stream, what was shown stays. A reply is finished in the streamed messages; when nothing was
    streamed or the stream failed, ``deliver(reply)`` sends it the ordinary way. Answers the reply
    and whether it went out streamed. A reply the adapter cannot deliver because it was restarted
    meanwhile (its client gone) is delivered by the gateway after the restart instead
    (``gateway.delivery.handover.rescue``)."""
    reply: Reply | None = None
    try:
        reply = await turn(stream.feed if stream is not None else None)
    finally:
        if stream is not None and reply is None:
            await stream.abort()
    if reply is None:
        return None, False
    streamed = False

    async def finish(reply: Reply) -> None:
        nonlocal streamed
        streamed = stream is not None and await stream.finish(reply.text)
        if not streamed:
            await deliver(reply)

    await deliver_or_hand_over(reply, finish)
    return reply, streamed


async def deliver_or_hand_over(reply: Reply, deliver: Callable[[Reply], Awaitable[None]]) -> None:
    """``deliver(reply)``, the adapter's own sending of a turn's reply; one the adapter cannot deliver
    because it was restarted meanwhile (its client gone, or the restart cancelled the sending) is
    delivered by the gateway after the restart instead (``gateway.delivery.handover.rescue``). For an
    adapter that does not stream; ``streamed_turn`` does this for the others."""
    try:
        await deliver(reply)
    except asyncio.CancelledError:
        # A restart of the adapter cancelled the delivery midway: the gateway sends the reply after
        # it (a shutdown does not; gateway/turn/inflight.py).
        rescue(reply, cancelled=True)
        raise
    except Exception as exc:
        if not rescue(reply):
            raise
        log.warning("the reply could not be delivered (%s: %s); the adapter was restarted meanwhile, it goes out "
                    "through the new run", type(exc).__name__, exc)  # fmt: skip
