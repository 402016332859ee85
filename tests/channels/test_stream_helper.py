"""The streaming helper (gateway/delivery/stream.py) against an in-memory platform and a virtual clock:
throttling, rate limits, stable splits, the exact final text, drafts, failures. No real waiting."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

import pytest

from gateway.delivery.stream import StreamedReply, StreamSettings
from gateway.util.text import split_text


class Limited(Exception):
    def __init__(self, wait: float) -> None:
        super().__init__(f"429, retry after {wait}")
        self.wait = wait


def retry_after(exc: BaseException) -> float | None:
    return exc.wait if isinstance(exc, Limited) else None


@dataclass
class Clock:
    """Virtual time: while a model streams (``driven``) it moves with the stream; otherwise a sleep
    moves it."""

    now: float = 0.0
    driven: bool = False

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        wake = self.now + max(seconds, 0.0)
        while self.driven and self.now < wake:  # noqa: ASYNC110 - polling virtual time is the point
            await asyncio.sleep(0)
        self.now = max(self.now, wake)
        await asyncio.sleep(0)


@dataclass
class Platform:
    """Messages by id; every call recorded with the virtual time it was made at."""

    clock: Clock
    drafts: bool = False
    messages: dict[int, str] = field(default_factory=dict)
    kept: list[int] = field(default_factory=list)  # with drafts: the messages sealed (sent for real)
    calls: list[tuple[float, str, int, str]] = field(default_factory=list)
    limited: list[float] = field(default_factory=list)  # waits to answer with, one call each
    fail_edits: int = 0  # the next this many edits fail (not a rate limit)
    fail_deletes: bool = False
    _ids: int = 0

    def _check(self, kind: str, mid: int, text: str) -> None:
        self.calls.append((self.clock.now, kind, mid, text))
        if self.limited:
            raise Limited(self.limited.pop(0))

    async def post(self, text: str) -> int:
        self._ids += 1
        self._check("post", self._ids, text)
        self.messages[self._ids] = text
        return self._ids

    async def edit(self, handle: int, text: str) -> None:
        self._check("edit", handle, text)
        if self.fail_edits > 0:
            self.fail_edits -= 1
            raise RuntimeError("platform down")
        assert self.messages[handle] != text, "an edit that changes nothing"
        self.messages[handle] = text

    async def seal(self, handle: int | None, text: str) -> int:
        self._ids += 1
        self._check("seal", self._ids, text)
        if handle is not None:
            del self.messages[handle]  # the draft goes away, the kept message replaces it
        self.messages[self._ids] = text
        self.kept.append(self._ids)
        return self._ids

    async def delete(self, handle: int) -> None:
        self._check("delete", handle, "")
        if self.fail_deletes:
            raise RuntimeError("platform down")
        del self.messages[handle]

    def shown(self) -> list[str]:
        return [self.messages[k] for k in sorted(self.messages)]


def make(platform: Platform, *, limit: int = 4096, interval: float = 1.0, first: int = 10) -> StreamedReply[int]:
    settings = StreamSettings(interval_s=interval, first_after_chars=first)
    return StreamedReply(platform, limit=limit, retry_after=retry_after, clock=platform.clock,
                         sleep=platform.clock.sleep, settings=settings)


async def feed(stream: StreamedReply[int], clock: Clock, pieces: list[str], every: float) -> None:
    """The model's stream: one piece every ``every`` virtual seconds, the pump running in between."""
    clock.driven = True
    try:
        for piece in pieces:
            stream.feed(piece)
            target = clock.now + every
            while clock.now < target:
                for _ in range(3):  # let the pump run (it makes up to a few calls per wake)
                    await asyncio.sleep(0)
                clock.now = min(target, clock.now + every / 4)
    finally:
        clock.driven = False


def gaps(platform: Platform) -> list[float]:
    times = [t for t, *_ in platform.calls]
    return [b - a for a, b in itertools.pairwise(times)]


async def test_a_reply_grows_by_throttled_edits_and_ends_exact() -> None:
    clock = Clock()
    platform = Platform(clock)
    stream = make(platform)
    words = [f"word{i} " for i in range(200)]
    await feed(stream, clock, words, every=0.05)  # 20 pieces a second, 10 s of model
    text = "".join(words)
    assert await stream.finish(text)
    assert platform.shown() == [text.strip()]
    kinds = [k for _, k, *_ in platform.calls]
    assert kinds[0] == "post" and kinds.count("edit") >= 3
    assert len(platform.calls) <= 12  # one call a second at most, however fast the model is
    assert min(gaps(platform)) >= 1.0 - 1e-9
    texts = [t for *_, t in platform.calls]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # it only grows
    assert platform.calls[-1][3] == text.strip()


async def test_the_first_message_waits_for_enough_text() -> None:
    clock = Clock()
    platform = Platform(clock)
    stream = make(platform, first=40)
    await feed(stream, clock, ["Hel", "lo ", "there"], every=0.5)
    assert platform.calls == [] and not stream.started
    assert not await stream.finish("Hello there")  # nothing streamed: the caller sends it whole
    assert platform.calls == []


async def test_a_rate_limit_is_honoured_and_the_text_catches_up() -> None:
    clock = Clock()
    platform = Platform(clock, limited=[])
    stream = make(platform)
    await feed(stream, clock, ["a" * 20 + " "], every=0.1)
    platform.limited = [7.0]  # the next call is refused: wait 7 s
    await feed(stream, clock, [f"more{i} " for i in range(100)], every=0.1)
    assert await stream.finish(stream._text())
    refused = next(i for i, c in enumerate(platform.calls) if c[1] == "edit")
    assert platform.calls[refused + 1][0] - platform.calls[refused][0] >= 7.0
    # after the wait the text as it is then goes out, not the refused (stale) one again
    assert len(platform.calls[refused + 1][3]) > len(platform.calls[refused][3])
    assert stream.stats["rate_limited"] == 1
    assert platform.shown() == [stream._text().strip()]


async def test_long_replies_split_stably_while_streaming() -> None:
    clock = Clock()
    platform = Platform(clock)
    stream = make(platform, limit=200, interval=0.1)
    lines = [f"line {i:03d} " + "x" * (i % 37) + ("\n\n" if i % 5 == 4 else "\n") for i in range(120)]
    sealed_seen: dict[int, str] = {}
    for line in lines:
        await feed(stream, clock, [line], every=0.03)
        for mid in list(platform.messages)[: stream._sealed]:
            # a sealed message never changes again
            sealed_seen.setdefault(mid, platform.messages[mid])
            assert platform.messages[mid] == sealed_seen[mid]
    text = "".join(lines)
    assert await stream.finish(text)
    assert platform.shown() == split_text(text, 200)  # cut exactly where the whole reply is cut
    assert all(len(m) <= 200 for m in platform.shown())
    assert not any(k == "delete" for _, k, *_ in platform.calls)


async def test_code_fences_reopen_across_sealed_messages() -> None:
    clock = Clock()
    platform = Platform(clock)
    stream = make(platform, limit=120, interval=0.1)
    text = "Here:\n```python\n" + "".join(f"print({i})\n" for i in range(40)) + "```\nDone."
    await feed(stream, clock, [text[i : i + 7] for i in range(0, len(text), 7)], every=0.02)
    assert await stream.finish(text)
    assert platform.shown() == split_text(text, 120)
    assert all(m.count("```") % 2 == 0 for m in platform.shown())


async def test_a_reply_changed_after_the_stream_is_laid_over_the_messages() -> None:
    clock = Clock()
    platform = Platform(clock)
    stream = make(platform, limit=100, interval=0.1)
    streamed = " ".join(f"w{i:03d}" for i in range(80))  # four messages' worth
    await feed(stream, clock, [streamed[i : i + 9] for i in range(0, len(streamed), 9)], every=0.05)
    assert len(platform.messages) >= 3
    notice = "Something went wrong while answering; the error is logged. Please try again."
    assert await stream.finish(notice)
    assert platform.shown() == [notice]  # the surplus messages are deleted
    assert platform.calls[-1][1] == "delete" and stream.stats["deletes"] >= 2


async def test_a_note_appended_after_the_stream_goes_on_in_place() -> None:
    clock = Clock()
    platform = Platform(clock)
    stream = make(platform)
    reply = "The answer is forty-two, as everyone knows."
    await feed(stream, clock, [reply[:20], reply[20:]], every=1.5)
    final = reply + "\n\n(This exchange could not be stored.)"
    assert await stream.finish(final)
    assert platform.shown() == [final]
    assert [k for _, k, *_ in platform.calls] == ["post", "edit", "edit"]


async def test_drafts_are_sealed_into_kept_messages() -> None:
    clock = Clock()
    platform = Platform(clock, drafts=True)
    stream = make(platform, limit=100, interval=0.1)
    text = " ".join(f"d{i:03d}" for i in range(60))
    await feed(stream, clock, [text[i : i + 11] for i in range(0, len(text), 11)], every=0.05)
    assert await stream.finish(text)
    assert platform.shown() == split_text(text, 100)
    assert sorted(platform.messages) == platform.kept  # only kept messages are left


async def test_a_failing_platform_stops_the_stream_and_the_partial_message_is_withdrawn() -> None:
    clock = Clock()
    platform = Platform(clock, fail_edits=10**6)
    stream = make(platform)
    await feed(stream, clock, [f"p{i} " * 5 for i in range(10)], every=0.5)
    assert stream.failed is not None and platform.shown() == ["p0 p0 p0 p0 p0"]
    assert not await stream.finish("whatever")  # the caller sends the reply whole ...
    assert platform.shown() == []  # ... and no partial message stays above it
    assert [kind for _, kind, *_ in platform.calls][-1] == "delete"


async def test_a_stream_that_failed_midway_is_finished_in_place_when_the_platform_is_back() -> None:
    clock = Clock()
    platform = Platform(clock, fail_edits=1)
    stream = make(platform)
    pieces = [f"p{i} " * 5 for i in range(10)]
    await feed(stream, clock, pieces, every=0.5)
    assert stream.failed is not None
    assert await stream.finish("".join(pieces))
    assert platform.shown() == ["".join(pieces).strip()]  # one message, the whole reply


async def test_a_partial_message_that_cannot_be_deleted_stays_and_the_reply_goes_out_whole() -> None:
    clock = Clock()
    platform = Platform(clock, fail_edits=10**6, fail_deletes=True)
    stream = make(platform)
    await feed(stream, clock, [f"p{i} " * 5 for i in range(10)], every=0.5)
    assert not await stream.finish("whatever")
    assert platform.shown() == ["p0 p0 p0 p0 p0"]


async def test_finish_does_not_wait_for_the_throttle_of_an_idle_pump() -> None:
    clock = Clock()
    platform = Platform(clock)
    stream = make(platform, interval=30.0)
    await feed(stream, clock, ["x" * 30, "y" * 30], every=0.1)
    start = clock.now
    assert await stream.finish("x" * 30 + "y" * 30)
    # the final edit still waits its turn (the platform's rate), but nothing more
    assert clock.now - start <= 30.0 and platform.shown() == ["x" * 30 + "y" * 30]


@pytest.mark.parametrize("limit", [60, 333, 4096])
async def test_any_stream_ends_as_split_text(limit: int) -> None:
    import random

    rng = random.Random(limit)
    vocab = ["alpha", "beta", "\n", "\n\n", "```py\n", "```\n", "x" * 70, "gamma,", " "]
    text = "".join(rng.choice(vocab) + " " for _ in range(600))
    clock = Clock()
    platform = Platform(clock)
    stream = make(platform, limit=limit, interval=0.05)
    cuts = sorted(rng.sample(range(1, len(text)), 80))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=False)]
    await feed(stream, clock, pieces, every=0.02)
    assert await stream.finish(text)
    assert platform.shown() == split_text(text, limit)


# ------------------------------------------------------------------------------ streamed_turn
async def test_streamed_turn_finishes_a_streamed_reply_and_delivers_nothing_else() -> None:
    from gateway.delivery.stream import streamed_turn
    from gateway.types import Reply

    clock = Clock()
    platform = Platform(clock)
    stream = make(platform, interval=0.0)
    delivered: list[str] = []

    async def turn(on_delta):  # type: ignore[no-untyped-def]
        assert on_delta is not None
        for piece in ("a reply long enough ", "to be streamed by edits"):
            on_delta(piece)
            await asyncio.sleep(0)
        return Reply(text="a reply long enough to be streamed by edits")

    async def deliver(reply: Reply) -> None:
        delivered.append(reply.text)

    reply, streamed = await streamed_turn(stream, turn, deliver)
    assert streamed and reply is not None and not delivered
    assert platform.shown() == ["a reply long enough to be streamed by edits"]


async def test_streamed_turn_without_a_stream_or_with_nothing_streamed_delivers_the_reply() -> None:
    from gateway.delivery.stream import streamed_turn
    from gateway.types import Reply

    delivered: list[str] = []

    async def deliver(reply: Reply) -> None:
        delivered.append(reply.text)

    async def short(on_delta):  # type: ignore[no-untyped-def]
        if on_delta is not None:
            on_delta("hi")  # under first_after_chars: nothing posted
        return Reply(text="hi")

    platform = Platform(Clock())
    assert (await streamed_turn(make(platform), short, deliver))[1] is False
    assert (await streamed_turn(None, short, deliver))[1] is False
    assert delivered == ["hi", "hi"] and platform.shown() == []


async def test_streamed_turn_stops_the_stream_when_the_turn_has_no_reply_or_raises() -> None:
    from gateway.delivery.stream import streamed_turn
    from gateway.types import Reply

    clock = Clock()
    platform = Platform(clock)

    async def deliver(reply: Reply) -> None:
        raise AssertionError("nothing to deliver")

    def turn_of(outcome: Exception | None):  # type: ignore[no-untyped-def]
        async def turn(on_delta):  # type: ignore[no-untyped-def]
            on_delta("x" * 30)
            await asyncio.sleep(0)
            if outcome is not None:
                raise outcome
            return None
        return turn

    stream = make(platform, interval=0.0)
    assert await streamed_turn(stream, turn_of(None), deliver) == (None, False)
    assert stream._closed and platform.shown() == ["x" * 30]  # what was shown stays
    stream = make(platform, interval=0.0)
    with pytest.raises(RuntimeError):
        await streamed_turn(stream, turn_of(RuntimeError("model down")), deliver)
    assert stream._closed
