"""Two ``kith run`` nodes on one PostgreSQL database, one Redis and one data directory, with the
scheduler lease's holder SIGKILLed and restarted: every turn stored once, every session log
complete, one scheduler at a time, no job lost (docs/architecture.md#several-nodes).

The default suite runs a short version (50 turns, one kill); ``-m chaos`` runs 1,000 turns from 50
clients with five kills. Both skip with a reason when PostgreSQL is unreachable."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from gateway.state import open_configured
from tests.cluster.nodes import (
    LEASE_TTL_S,
    Outcome,
    failover_delays,
    log_of,
    reminder_rows,
    run_cluster,
    session_log_ids,
)
from tests.pg import fresh_pg_database
from tests.storage import select_rows


def check(out: Outcome, tmp: Path, *, clients: int, turns: int) -> None:
    per_client = turns // clients
    assert len(out.turns) == clients * per_client, log_of(tmp)

    state = open_configured(out.data_dir, out.state_url)
    try:
        rows = select_rows(state, "SELECT turn_id, role, content FROM turns")
    finally:
        state.close()
    answered = {r[0] for r in rows if r[1] == "assistant"}
    by_text: dict[str, list[str]] = {}
    for turn_id, role, content in rows:
        if role == "user":
            by_text.setdefault(content, []).append(turn_id)
    for (client, k), reply_turn in out.turns.items():
        text = f"client {client} turn {k}"
        stored = [t for t in by_text.get(text, []) if t in answered]
        # Stored once, answered: a message sent again after its node died either ran once (the first
        # attempt never finished) or was recognised as done (the dedupe key): never twice.
        assert len(stored) == 1, (text, stored, by_text.get(text))
        if reply_turn:
            assert stored == [reply_turn]
    unanswered = [t for ids in by_text.values() for t in ids if t not in answered]
    assert len(unanswered) <= len(out.kills) * clients, unanswered  # messages whose node died mid-turn

    logged = session_log_ids(out.data_dir)
    for turn_id in answered:
        assert logged.get(turn_id) == 1, (turn_id, logged.get(turn_id))

    # One scheduler at a time: grants in token order, each after the previous one ended (released,
    # or expired a full TTL after its last renewal).
    grants = out.grants
    assert grants, "no grant of the scheduler lease was recorded"
    assert [g.token for g in grants] == sorted(g.token for g in grants)
    for before, after in itertools.pairwise(grants):
        if before.released_ms is not None:
            assert after.acquired_ms >= before.released_ms, (before, after)
        else:
            assert after.acquired_ms >= before.renewed_ms + LEASE_TTL_S * 1000 - 5, (before, after)
    assert len(grants) >= len(out.kills) + 1

    delays = failover_delays(out)
    assert len(delays) == len(out.kills)
    # The TTL after the last renewal, plus one acquisition round (a third of it), plus scheduling delays
    # of a loaded machine (generous: CI shares its cores).
    assert all(d <= LEASE_TTL_S * 4 / 3 + 3 for d in delays), delays

    # A reminder reaches the outbox once (its delivery id is its occurrence); it may be sent again only
    # by a node dying between the platform taking it and the row being marked sent: once per kill at most.
    for uid, rows in reminder_rows(out).items():
        assert len(rows) == 1, (uid, rows)
        assert rows[0].attempts <= 1 + len(out.kills), rows[0]

    assert out.probes_done == out.probes  # 0 lost jobs
    assert out.dead_letters == 0
    print(f"\ncluster: {len(out.turns)} turns, {out.redelivered} resent after a kill, {len(unanswered)} "
          f"unanswered messages of killed turns, {len(grants)} lease grants, failover after SIGKILL {delays} s")


@pytest.mark.long
async def test_two_nodes_one_kill(tmp_path: Path) -> None:
    with fresh_pg_database() as url:
        out = await run_cluster(tmp_path, url, clients=10, turns=50, kills=1, probes=30)
        check(out, tmp_path, clients=10, turns=50)


@pytest.mark.chaos
async def test_two_nodes_thousand_turns_five_kills(tmp_path: Path) -> None:
    with fresh_pg_database() as url:
        out = await run_cluster(tmp_path, url, clients=50, turns=1000, kills=5, probes=300, reminders=5)
        check(out, tmp_path, clients=50, turns=1000)
        assert len(out.reminders) == 5
