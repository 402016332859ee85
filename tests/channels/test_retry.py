"""``adapters.ratelimit.with_retry``: retries what the platform says to retry, never a cancelled send."""

from __future__ import annotations

import asyncio

import pytest

from adapters.ratelimit import with_retry


class Busy(Exception):
    pass


def after_busy(exc: BaseException) -> float | None:
    return 0.01 if isinstance(exc, Busy) else None


async def test_a_temporary_failure_is_retried_and_a_refusal_is_not() -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Busy()
        return "sent"

    assert await with_retry(flaky, retry_after=after_busy, what="test send") == "sent"
    assert len(calls) == 3

    async def refused() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError):
        await with_retry(refused, retry_after=after_busy, what="test send")


async def test_a_cancel_that_a_library_turns_into_a_retryable_error_is_not_retried() -> None:
    """Python 3.11's ``wait_for`` (used inside SMTP and HTTP clients) can swallow a cancel and raise its
    TimeoutError; retrying then held a restart up for the whole retry budget."""
    started = asyncio.Event()
    calls: list[int] = []

    async def swallows_cancel() -> None:
        calls.append(1)
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise Busy() from None  # what a client that converts the cancel does

    task = asyncio.create_task(with_retry(swallows_cancel, retry_after=after_busy, what="test send"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert len(calls) == 1
