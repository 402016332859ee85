"""Shared fixtures: a gateway built with chosen plugins, the fake Anthropic server, a WS client."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, settings

from gateway.app import Gateway
from gateway.config import Config
from gateway.testing import GatewayFactory, test_config
from tests.fakes.anthropic import API_KEY, FakeAnthropic


def make_config(tmp_path: Path, **overrides: Any) -> Config:
    return test_config(tmp_path / "data", **overrides)


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    fake = await FakeAnthropic().start()
    yield fake
    await fake.stop()


@pytest.fixture
def anthropic_llm(fake_anthropic: FakeAnthropic) -> dict[str, Any]:
    return {"provider": "anthropic", "api_key": API_KEY, "base_url": fake_anthropic.base_url, "max_retries": 0,
            "timeout_s": 10}


@pytest.fixture
def make_gateway(kith_gateway: GatewayFactory) -> GatewayFactory:
    """kith's own tests build gateways with the public host fixture (gateway/testing.py)."""
    return kith_gateway


class WSClient:
    """A minimal client of docs/protocol.md for tests."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.seq = 0

    async def recv(self, timeout: float = 10) -> dict[str, Any]:
        msg = await self.ws.receive(timeout=timeout)
        assert msg.type == aiohttp.WSMsgType.TEXT, (msg.type, msg.data, msg.extra)
        return json.loads(msg.data)  # type: ignore[no-any-return]

    async def hello(self, client_id: str, name: str = "") -> dict[str, Any]:
        await self.ws.send_json({"type": "hello", "client_id": client_id, "name": name})
        return await self.recv()

    async def ask(self, text: str) -> tuple[dict[str, Any], list[str]]:
        self.seq += 1
        ref = f"t{self.seq}-{uuid.uuid4().hex[:8]}"  # ids are unique per client (a reused id = redelivery)
        await self.ws.send_json({"type": "message", "id": ref, "text": text})
        deltas: list[str] = []
        while True:
            frame = await self.recv()
            if frame["type"] == "delta":
                deltas.append(frame["text"])
            elif frame["type"] in ("reply", "error"):
                return frame, deltas


@pytest.fixture
async def ws_connect() -> AsyncIterator[Callable[..., Awaitable[WSClient]]]:
    session = aiohttp.ClientSession()
    sockets: list[aiohttp.ClientWebSocketResponse] = []

    async def connect(gw: Gateway, **kwargs: Any) -> WSClient:
        ws = await session.ws_connect(f"http://127.0.0.1:{gw.port}/ws", **kwargs)
        sockets.append(ws)
        return WSClient(ws)

    yield connect
    for ws in sockets:
        await ws.close()
    await session.close()


# Property tests judge their inputs, not the clock: on a loaded machine (the parallel suite, CI on two
# shared cores) Hypothesis's per-example deadline and its "input generation is slow" check fail tests that
# are right. Speed belongs in the benchmarks. No example database either: nothing written to the checkout.
settings.register_profile("kith", deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
settings.load_profile("kith")


# The state backends (tests/pg.py): state_url / any_state run a test on SQLite and on PostgreSQL.
from tests.pg import _pg_session, any_state, pg_url, state_url  # noqa: E402, F401


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long runs (chaos, soak, fuzz) get an hour before pytest-timeout calls them hung; the default
    suite's tests get the ini's 300 s. Tests marked ``long`` go first (in their shuffled order): started
    last, one of them kept the other workers idle at the end of the parallel run."""
    for item in items:
        if item.get_closest_marker("timeout") is None and any(
                item.get_closest_marker(m) for m in ("chaos", "soak", "fuzz")):
            item.add_marker(pytest.mark.timeout(3600))
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: the rest keep their order


@pytest.hookimpl(tryfirst=True, specname="pytest_collection_modifyitems")  # before `-m` deselects them
def pytest_serial_tests_name_their_marker(items: list[pytest.Item]) -> None:
    """scripts/test gives the serial run only the files that name the marker (grep): a serial test whose
    file does not name it would run in neither part, so it fails the collection instead."""
    unnamed = sorted({str(item.path) for item in items if item.get_closest_marker("serial")
                      and "mark.serial" not in item.path.read_text()})  # fmt: skip
    if unnamed:
        raise pytest.UsageError(f"serial tests in files that do not write `mark.serial`: {unnamed}")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-parallex, the parallel part of scripts/test
def pytest_parallex_setup(config: pytest.Config) -> None:
    """In the process that collected the suite, just before its workers are forked from it: the
    source tree the static checks walk (tests/source_tree.py) is parsed here once, and every worker
    shares the trees, instead of each worker that runs a check parsing it again."""
    from tests import progress
    from tests.source_tree import warm

    warm(Path(__file__).resolve().parent.parent)
    progress.install(config, config.stash[_SELECTED])


_SELECTED = pytest.StashKey[int]()


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_SELECTED] = len(session.items)  # after `-m` and `-k` deselected theirs


# ------------------------------------------------------------------------------- hang diagnosis

def _dump_running_loops(nodeid: str) -> None:
    """Shortly before pytest-timeout fails a test, print every task of each running event loop with its
    whole await chain: pytest-timeout itself shows threads only, and a hung asyncio test's threads are
    all idle in the loop's select."""
    import asyncio
    import gc
    import sys

    from gateway.testing import task_stacks

    loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()]
    for loop in loops:
        try:
            stacks = task_stacks(loop)
        except RuntimeError as exc:  # the set of tasks changed while it was read: not worth a retry
            stacks = f"(could not read the tasks: {exc})"
        print(f"\n+++ {nodeid}: tasks of a running event loop, before the timeout +++\n{stacks}",
              file=sys.stderr, flush=True)  # fmt: skip


_hang_timers: dict[str, Any] = {}


def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> None:
    import threading

    if settings.timeout and settings.timeout > 2:
        timer = threading.Timer(settings.timeout * 0.95, _dump_running_loops, args=(item.nodeid,))
        timer.daemon = True
        timer.start()
        _hang_timers[item.nodeid] = timer


def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    timer = _hang_timers.pop(item.nodeid, None)
    if timer is not None:
        timer.cancel()
