"""The dedupe table keeps keys for a retention window (30 days), longer than any platform redelivers,
and is pruned as turns go by instead of growing by one row per message forever (issue 13)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.state import State
from gateway.turn.dedupe import RETENTION, Dedupe
from tests.storage import select_rows


def keys(state: State) -> list[str]:
    return [r[0] for r in select_rows(state, "SELECT message_id FROM dedupe ORDER BY created_at, message_id")]


def test_keys_older_than_the_window_are_pruned_in_batches_as_messages_arrive(any_state: State) -> None:
    state = any_state  # SQLite and PostgreSQL (tests/pg.py)
    now = datetime.now(UTC)
    clock = [now]
    dedupe = Dedupe(state, clock=lambda: clock[0], prune_every_s=3600, prune_batch=3)
    for i in range(5):
        assert dedupe.claim("telegram", f"m{i}")
        dedupe.persist("telegram", f"m{i}")
    assert keys(state) == [f"m{i}" for i in range(5)]
    assert timedelta(days=30) <= RETENTION

    clock[0] = now + RETENTION - timedelta(hours=1)  # inside the window: a redelivery is still caught
    assert dedupe.prune() == 0 and len(keys(state)) == 5
    assert not Dedupe(state).claim("telegram", "m0"), "a restart still drops a redelivery"

    clock[0] = now + RETENTION + timedelta(seconds=1)
    assert dedupe.prune() == 3  # the oldest first, one batch per statement
    dedupe.claim("telegram", "m5")
    dedupe.persist("telegram", "m5")  # a full batch went: the next persist takes the rest
    assert keys(state) == ["m5"] and dedupe.pruned == 5


def test_pruning_runs_at_most_once_per_interval(any_state: State) -> None:
    state = any_state  # SQLite and PostgreSQL (tests/pg.py)
    clock = [datetime.now(UTC)]
    dedupe = Dedupe(state, clock=lambda: clock[0], prune_every_s=3600)
    dedupe.persist("discord", "a")  # the first persist after start prunes (nothing yet)
    clock[0] += RETENTION * 2
    dedupe.persist("discord", "b")  # within the interval: no pruning on this turn
    assert keys(state) == ["a", "b"]
    dedupe._next_prune = 0.0  # the interval has passed
    dedupe.persist("discord", "c")
    assert keys(state) == ["b", "c"], "only the key from before the window went"
