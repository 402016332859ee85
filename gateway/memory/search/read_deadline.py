"""One deadline for the whole memory read path of a turn (seed 001: "run all three tiers within a deadline").

The three tiers are separate stages: the people lookup (``plugins/people.py``), hybrid recall and the
filter tier (``plugins/recall.py``, ``filter_tier.py``). Each used to be bounded on its own, if at all,
so a slow hybrid search and a slow filter call added up. Now the first tier of a turn to run starts
one clock (``memory.read_deadline_ms``), kept in the turn's stash, and every later tier gets what is
left of it: hybrid recall is waited for at most the remainder, and the filter's own ``deadline_ms`` is
cut to what remains after hybrid recall. A tier that finds nothing left is skipped and says so.

The people lookup starts the clock and spends from it, but is never cut: it is the correctness floor
(a handful of small file reads, no model), and seed 001 surfaces people files whatever the other tiers do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.types import StashKey, Turn

# The clock every tier reads. Monotonic: a wall-clock step must not stretch or spend a turn's budget.
# A module attribute so a test can drive it (a controllable clock instead of sleeps).
clock: Callable[[], float] = time.monotonic


@dataclass(frozen=True, slots=True)
class ReadDeadline:
    started: float  # on ``clock``
    budget_s: float

    def remaining(self) -> float:
        """Seconds left of the budget (0 when spent)."""
        return max(0.0, self.started + self.budget_s - clock())

    def spent_ms(self) -> float:
        return (clock() - self.started) * 1000


DEADLINE: StashKey[ReadDeadline] = StashKey()


def for_turn(turn: Turn, budget_ms: int) -> ReadDeadline:
    """The turn's read deadline, started now by the first tier that asks."""
    found = turn.stash.get(DEADLINE)
    if found is None:
        found = ReadDeadline(started=clock(), budget_s=budget_ms / 1000)
        turn.stash[DEADLINE] = found
    return found
