"""Schema-driven fuzzing of the person API (``-m fuzz``): schemathesis reads the document the daemon
serves and sends generated requests, valid and invalid, to every route; no answer may be a 500 and
every answer must match the document. The daemon runs in a thread of its own (schemathesis calls are
blocking), on a data dir the test made, with a person who has sessions, files and facts."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error, response_schema_conformance

from gateway.http.auth import OPERATOR_TOKEN
from gateway.testing import message, test_config
from tests.signin.rig import daemon, person

EXAMPLES = 60  # per operation and mode
ERASE = "DELETE /api/users/{uid}"


@dataclass
class Live:
    base: str = ""
    token: str = ""
    alice: str = ""
    stop: Any = None
    loop: asyncio.AbstractEventLoop | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


def _serve(live: Live, data: Path) -> None:
    async def main() -> None:
        async with daemon(test_config(data)) as gw:
            live.alice = await person(gw, "alice")
            await gw.handle_inbound(message("we walked to the lighthouse", account="alice"))
            store = gw.memory_store(live.alice)
            store.write("USER.md", "# Alice\n- likes tea\n", source="test")
            assert gw.kg is not None
            gw.kg.add(live.alice, "Alice", "lives_in", "Porto", valid_from="2025-01-01")
            gw.kg.add(live.alice, "Alice", "lives_in", "Lisbon", valid_from="2026-01-01")
            await gw.settle()
            live.base = f"http://127.0.0.1:{gw.port}"
            live.token = gw.http_app[OPERATOR_TOKEN]
            live.stop = asyncio.Event()
            live.loop = asyncio.get_running_loop()
            live.ready.set()
            await live.stop.wait()

    try:
        asyncio.run(main())
    except BaseException as exc:
        live.error = exc
        live.ready.set()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    state = Live()
    thread = threading.Thread(target=_serve, args=(state, tmp_path_factory.mktemp("fuzz") / "data"), daemon=True)
    thread.start()
    assert state.ready.wait(120), "the daemon did not start"
    if state.error is not None:
        raise state.error
    yield state
    assert state.loop is not None
    state.loop.call_soon_threadsafe(state.stop.set)
    thread.join(60)


@pytest.fixture(scope="module")
def http(live: Live) -> Iterator[requests.Session]:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {live.token}"
    yield session
    session.close()


def _call(case: Any, live: Live, http: requests.Session) -> int:
    # The operator token reaches every route; a generated {uid} of even length is replaced by a real
    # person, so the handlers behind the access check get fuzzed too, not only the 404.
    # Not for the erase, which would leave no person to fuzz the other operations on (its own
    # validation is still fuzzed; tests/api/test_operator_routes.py erases a person for real).
    uid = (case.path_parameters or {}).get("uid")
    if isinstance(uid, str) and (uid == "me" or len(uid) % 2 == 0) and case.operation.label != ERASE:
        case.path_parameters["uid"] = live.alice
    # Each request stands alone, on the operator token: a session cookie a fuzzed POST /api/session/local
    # left in the jar would ride along, and requests' cookie jar raises on a fuzzed Host header before
    # anything is sent (ValueError: Invalid IPv6 URL for "Host: [").
    http.cookies.clear()
    response = case.call(base_url=live.base, session=http)
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
    return int(response.status_code)


def _fuzz(operation: Any, mode: GenerationMode, live: Live, http: requests.Session) -> set[int]:
    statuses: set[int] = set()

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: Any) -> None:
        statuses.add(_call(case, live, http))

    run()
    return statuses


@pytest.mark.fuzz
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_request_makes_the_api_fail(live: Live, http: requests.Session, mode: GenerationMode) -> None:
    """Every operation of the served document, with valid (positive) and schema-violating (negative)
    requests; schemathesis' own pytest integration is not used (it does not load under pytest 9)."""
    schema = schemathesis.openapi.from_url(f"{live.base}/api/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    answered: dict[str, set[int]] = {}
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not (operation.body or operation.query or operation.path_parameters):
            continue  # nothing to make invalid
        answered[operation.label] = _fuzz(operation, mode, live, http)
    # The generated requests got past validation and the access check, not only 400s and 404s.
    succeeded = [label for label, statuses in answered.items() if any(200 <= s < 300 for s in statuses)]
    if mode is GenerationMode.POSITIVE:
        assert len(succeeded) >= 15, answered
