"""Whether the model keeps failing: consecutive failed calls per role, for ``/healthz`` and the chat's
"the model is not answering" state (docs/operations.md#healthz, docs/web.md#when-the-model-is-down).

The default ``gateway_llm_call`` (``gateway.llm.provider``) records every call that reached a provider:
a failure (``LLMError``: unreachable, refused, timed out after retries) adds one, any answer resets the
role. ``FAILING_AFTER`` failures in a row make ``/healthz`` say ``degraded`` with the last error, until
the next answer. A spent budget is not a failure of the model, and is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.types import Stash

FAILING_AFTER = 3
ERROR_CHARS = 200


@dataclass(slots=True)
class RoleHealth:
    failures: int = 0
    since: datetime | None = None  # the first failure of the run
    last_error: str = ""


HEALTH: StashKey[dict[str, RoleHealth]] = StashKey()


def _roles(stash: Stash) -> dict[str, RoleHealth]:
    table = stash.get(HEALTH)
    if table is None:
        table = stash[HEALTH] = {}
    return table


def failed(stash: Stash, role: str, error: BaseException) -> None:
    health = _roles(stash).setdefault(role, RoleHealth())
    if not health.failures:
        health.since = datetime.now(UTC)
    health.failures += 1
    health.last_error = " ".join(str(error).split())[:ERROR_CHARS]


def answered(stash: Stash, role: str) -> None:
    health = _roles(stash).get(role)
    if health is not None and health.failures:
        health.failures, health.since, health.last_error = 0, None, ""


def report(stash: Stash) -> tuple[dict[str, Any], list[str]]:
    """The model's part of ``/healthz``: ``{role: {failures, since, last_error}}`` for roles failing now,
    and a problem line for each that failed ``FAILING_AFTER`` times in a row."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    for role, h in sorted(_roles(stash).items()):
        if not h.failures:
            continue
        since = h.since.isoformat(timespec="seconds") if h.since else ""
        out[role] = {"failures": h.failures, "since": since, "last_error": h.last_error}
        if h.failures >= FAILING_AFTER:
            problems.append(f"the {role!r} model failed {h.failures} calls in a row since {since}: {h.last_error}")
    return out, problems
