"""Turns first: background embedding waits while a turn is worked on (gateway/turn/gate.py).

Mechanisms only (the machine is shared): `kith bench turn` measures what the gate is worth.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from gateway.hookspecs import hookimpl
from gateway.testing import GatewayFactory, message
from gateway.turn.gate import TURNS, TurnGate


def _wait_in_thread(gate: TurnGate) -> tuple[threading.Thread, list[float]]:
    done: list[float] = []
    thread = threading.Thread(target=lambda: (gate.wait(), done.append(time.monotonic())))
    thread.start()
    return thread, done


def test_no_turn_no_wait() -> None:
    gate = TurnGate(max_wait_s=5.0, window_s=0.1, quiet_s=0.0)
    started = time.monotonic()
    gate.wait()
    assert time.monotonic() - started < 1.0  # returns at once (a loaded machine may still delay it)


def test_a_background_run_waits_for_the_turn_and_a_quiet_moment_after_it() -> None:
    gate = TurnGate(max_wait_s=30.0, window_s=0.1, quiet_s=0.2)
    with gate.turn():
        thread, done = _wait_in_thread(gate)
        time.sleep(0.3)
        assert not done  # still waiting: the turn is on
        ended = time.monotonic()
    thread.join(30)
    assert done and done[0] - ended >= 0.2  # and then for the turns to stay away quiet_s


def test_a_model_call_does_not_hold_background_work_back() -> None:
    gate = TurnGate(max_wait_s=30.0, window_s=0.1, quiet_s=0.0)
    with gate.turn():
        with gate.waiting():
            assert gate.busy == 0
            thread, done = _wait_in_thread(gate)
            thread.join(30)
            assert done
        assert gate.busy == 1
    assert gate.busy == 0
    with gate.waiting():  # outside a turn: nothing to give back, and nothing is taken afterwards
        pass
    assert gate.busy == 0


def test_turns_without_pause_still_leave_background_work_a_share() -> None:
    gate = TurnGate(max_wait_s=0.2, window_s=1.0, quiet_s=0.0)
    with gate.turn():  # a turn that never ends, as a gateway busy without pause looks
        started = time.monotonic()
        gate.wait()
        assert time.monotonic() - started >= 0.2  # waited max_wait_s ...
        started = time.monotonic()
        gate.wait()  # ... and the window that follows passes without waiting
        assert time.monotonic() - started < 0.2
        time.sleep(1.05)
        started = time.monotonic()
        gate.wait()  # the window is over: it waits again
        assert time.monotonic() - started >= 0.2
    assert gate.waited_s >= 0.4


class _Watch:
    """Records how many turns the process gate counted at two points of a turn."""

    def __init__(self) -> None:
        self.in_context: list[int] = []
        self.in_model: list[int] = []

    @hookimpl
    def gateway_context_sections(self) -> None:
        self.in_context.append(TURNS.busy)

    @hookimpl(tryfirst=True)
    def gateway_llm_call(self) -> None:
        self.in_model.append(TURNS.busy)  # returns None: the echo provider answers


async def test_a_gateway_turn_holds_the_gate_except_while_the_model_answers(
    make_gateway: GatewayFactory, tmp_path: Path,
) -> None:  # fmt: skip
    watch = _Watch()
    gw = await make_gateway(plugins=(watch,))
    before = TURNS.busy
    reply: Any = await gw.handle_inbound(message("hello"))
    assert reply is not None and reply.text
    assert watch.in_context == [before + 1]
    assert watch.in_model == [before]
    assert TURNS.busy == before


def test_only_a_turn_hands_its_place_back_while_it_waits() -> None:
    """``waiting`` inside a turn frees the gate; outside any turn (a bus job, an HTTP request that
    waits on index work) it must not count another task's turn out."""
    gate = TurnGate(max_wait_s=30.0, window_s=0.1, quiet_s=0.0)
    with gate.turn():
        assert gate.busy == 1
        with gate.waiting():
            assert gate.busy == 0
            with gate.waiting():  # nested: still handed back once
                assert gate.busy == 0
        assert gate.busy == 1
    assert gate.busy == 0

    result: list[int] = []

    def outside() -> None:  # another thread = another context: no turn of its own
        with gate.waiting():
            result.append(gate.busy)

    with gate.turn():
        worker = threading.Thread(target=outside)
        worker.start()
        worker.join(10)
        assert result == [1]  # the running turn still holds the gate


async def test_forget_does_not_wait_for_the_indexer_that_waits_for_it(
    kith_gateway: GatewayFactory, monkeypatch: Any
) -> None:
    """/forget re-indexes the changed files before it answers, on the background indexer, which yields
    to turns: the command's turn must not hold the gate meanwhile. It did, and the indexer waited out
    the gate's longest pause for the turn waiting on it (past the command's 5 s deadline on a loaded
    machine: "Unknown command /forget"). With a pause longer than that deadline the old way always fails."""
    monkeypatch.setattr(TURNS, "max_wait_s", 60.0)
    gw = await kith_gateway()
    await gw.handle_inbound(message("My locker code is QUOKKA-4471."))
    await gw.settle()
    reply = await gw.handle_inbound(message("/forget QUOKKA-4471"))
    assert reply is not None and "Forgotten" in reply.text, reply
