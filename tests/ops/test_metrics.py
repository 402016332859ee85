"""/metrics: the real daemon's HTTP server, parsed with prometheus_client's own text parser."""

from __future__ import annotations

from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from gateway.app import Gateway
from gateway.testing import GatewayFactory, message
from tests.fakes.anthropic import FakeAnthropic


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(gw: Gateway, *, token: str | None = None, host: str = "127.0.0.1",
                 extra: dict[str, str] | None = None) -> tuple[int, str]:  # fmt: skip
    headers = {"Host": f"{host}:{gw.port}", **(extra or {})}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{gw.port}/metrics",
                                                         headers=headers) as r:  # fmt: skip
        return r.status, await r.text()


async def test_turns_stages_tokens_jobs_adapters_index_disk(make_gateway: GatewayFactory,
                                                            anthropic_llm: dict[str, Any],
                                                            fake_anthropic: FakeAnthropic) -> None:
    llm = {**anthropic_llm, "prices": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}
    gw = await make_gateway(llm=llm)
    _, before_text = await scrape(gw)
    before = samples(before_text)
    for i in range(3):
        assert await gw.handle_inbound(message(f"hello {i}", account="metrics-a"))
    await gw.handle_inbound(message("/help", account="metrics-a"))
    await gw.settle()

    status, text = await scrape(gw)
    assert status == 200
    found = samples(text)
    turns = "kith_turns_total"
    assert value(found, turns, channel="websocket", outcome="replied") - value(
        before, turns, channel="websocket", outcome="replied") == 3
    assert value(found, turns, channel="websocket", outcome="notice") - value(
        before, turns, channel="websocket", outcome="notice") == 1
    # per-stage latency: the recall stage (a memory stage, a plugin's context section) and the model call
    stages = {dict(labels)["stage"] for (name, labels) in found if name == "kith_stage_seconds_count"}
    assert {"context_sections", "llm_call", "after_turn", "handle_turn"} <= stages
    assert value(found, "kith_stage_seconds_count", stage="context_sections", plugin="plugins.recall") >= 3
    # tokens and cost by role, from the fake's usage answers
    assert value(found, "kith_llm_tokens_total", role="main", kind="input") > value(
        before, "kith_llm_tokens_total", role="main", kind="input")
    assert value(found, "kith_llm_cost_usd_total", role="main") > value(before, "kith_llm_cost_usd_total", role="main")
    # levels read at scrape time
    assert value(found, "kith_jobs", queue="memory.index", state="pending") == 0
    assert ("kith_dead_letters", (("queue", "memory.index"),)) in found
    assert value(found, "kith_adapter_state", adapter="websocket", state="running") == 1
    assert value(found, "kith_index_points") > 0
    assert value(found, "kith_disk_free_bytes") > 0
    assert all(v == 0 for (name, _), v in found.items() if name == "kith_scrape_errors")
    assert value(found, "process_resident_memory_bytes") > 0


async def test_with_server_token_it_needs_the_metrics_or_operator_token(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(server={"port": 0, "token": "server-token-123456"},
                            metrics={"token": "scrape-token-123456"})
    assert (await scrape(gw))[0] == 401
    assert (await scrape(gw, token="wrong-token-1234567"))[0] == 401
    status, text = await scrape(gw, token="scrape-token-123456")
    assert status == 200 and "kith_turns" in text
    assert (await scrape(gw, token="server-token-123456"))[0] == 200  # the operator credential
    # behind a proxy (allowed with server.token) the scrape token is still required
    assert (await scrape(gw, extra={"X-Forwarded-For": "203.0.113.9"}))[0] == 401
    assert (await scrape(gw, token="scrape-token-123456", extra={"X-Forwarded-For": "203.0.113.9"}))[0] == 200


async def test_loopback_is_open_without_tokens_a_metrics_token_closes_it(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    assert (await scrape(gw))[0] == 200
    assert (await scrape(gw, host="evil.example"))[0] == 421  # DNS rebinding: the guard runs first
    assert (await scrape(gw, extra={"X-Forwarded-For": "203.0.113.9"}))[0] == 403  # proxied without a token
    # Off-The-Record turns count no tokens (the usage table's rule); a normal turn does
    calls = "kith_llm_calls_total"
    await gw.handle_inbound(message("/otr on", account="metrics-otr"))
    before = samples((await scrape(gw))[1])
    await gw.handle_inbound(message("secret words", account="metrics-otr"))
    after = samples((await scrape(gw))[1])
    assert value(after, calls, role="main") == value(before, calls, role="main")
    await gw.handle_inbound(message("plain words", account="metrics-plain"))
    assert value(samples((await scrape(gw))[1]), calls, role="main") == value(before, calls, role="main") + 1
    # the same daemon, reconfigured: a metrics token closes loopback too; metrics can be off
    gw.config.metrics.token = SecretStr("scrape-token-123456")
    assert (await scrape(gw))[0] == 401
    assert (await scrape(gw, token="scrape-token-123456"))[0] == 200
    gw.config.metrics.enabled = False
    assert (await scrape(gw, token="scrape-token-123456"))[0] == 404
