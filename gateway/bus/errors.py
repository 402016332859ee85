"""Errors raised by the job bus. All derive from BusError so callers can catch one type."""

from __future__ import annotations


class BusError(Exception):
    """Base class for job-bus failures."""


class ServerError(BusError):
    """The Redis server could not be started, reached, or is unsuitable (e.g. older than 6.2)."""


class UnknownJob(BusError):
    """``enqueue`` named a job that no plugin registered."""


class PayloadError(BusError):
    """A payload is not a JSON object, is too large, or cannot be encoded."""


def server_refuses_writes(exc: Exception) -> bool:
    """MISCONF: the server could not write its append-only file (a full disk) and refuses writes,
    XREADGROUP and the upkeep scripts included, until its own retry of that write succeeds. Worker
    loops wait it out instead of stopping."""
    return str(exc).startswith("MISCONF")
