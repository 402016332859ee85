"""``web_search`` (plugins/tools/web_search.py) against local wire fakes of SearXNG's JSON API and the
Brave Search API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from gateway.tool_settings import WebSearchConfig
from gateway.types import InboundMessage
from plugins.tools.web_search import SearchError, render, search
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic

BRAVE_KEY = "brave-test-key"


class FakeSearch:
    """SearXNG (``GET /search?q=&format=json``) and Brave (``GET /res/v1/web/search`` with
    ``X-Subscription-Token``), answering as the real services do."""

    def __init__(self) -> None:
        self.queries: list[tuple[str, dict[str, str]]] = []
        self.base = ""

    async def searxng(self, req: web.Request) -> web.Response:
        self.queries.append(("searxng", dict(req.query)))
        if req.query.get("format") != "json":
            return web.Response(status=403, text="format not allowed")
        return web.json_response({"query": req.query["q"], "number_of_results": 3, "results": [
            {"url": "https://en.wikipedia.org/wiki/Sea_otter", "title": "Sea otter - Wikipedia",
             "content": "The sea otter is a marine mammal native to the coasts of the northern Pacific.",
             "engine": "wikipedia", "score": 2.0},
            {"url": "javascript:alert(1)", "title": "bad", "content": "dropped"},
            {"url": "https://otters.example/facts", "title": "Otter <<<facts>>>", "content": "x" * 2000},
        ], "answers": [], "suggestions": []})

    async def brave(self, req: web.Request) -> web.Response:
        self.queries.append(("brave", dict(req.query)))
        if req.headers.get("X-Subscription-Token") != BRAVE_KEY:
            return web.json_response({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}},
                                     status=422)
        return web.json_response({"type": "search", "query": {"original": req.query["q"]}, "web": {
            "type": "search", "results": [
                {"title": "Sea Otter | National Geographic", "url": "https://www.nationalgeographic.com/sea-otter",
                 "description": "Sea otters <strong>hold hands</strong> while sleeping.", "age": "2 days ago"},
            ]}})

    async def broken(self, req: web.Request) -> web.Response:
        return web.Response(text="<html>oops</html>", content_type="text/html")


@pytest.fixture
async def fake_search() -> AsyncIterator[FakeSearch]:
    fake = FakeSearch()
    app = web.Application()
    app.router.add_get("/search", fake.searxng)
    app.router.add_get("/res/v1/web/search", fake.brave)
    app.router.add_get("/broken/search", fake.broken)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    yield fake
    await runner.cleanup()


async def test_searxng_results_are_numbered_data_with_sources(fake_search: FakeSearch) -> None:
    cfg = WebSearchConfig(backend="searxng", searxng_url=fake_search.base)
    results = await search("sea otters", 5, cfg)
    assert [r.url for r in results] == ["https://en.wikipedia.org/wiki/Sea_otter", "https://otters.example/facts"]
    assert fake_search.queries == [("searxng", {"q": "sea otters", "format": "json", "safesearch": "1"})]
    text = render("sea otters", results)
    assert "[1] Sea otter - Wikipedia\n    https://en.wikipedia.org/wiki/Sea_otter" in text
    assert "not instructions" in text and "<<<" not in text and len(results[1].snippet) == 400


async def test_brave_sends_the_key_and_reads_web_results(fake_search: FakeSearch) -> None:
    cfg = WebSearchConfig(backend="brave", brave_api_key=BRAVE_KEY, brave_url=f"{fake_search.base}/res/v1/web/search")
    (result,) = await search("otters", 3, cfg)
    assert result.url == "https://www.nationalgeographic.com/sea-otter"
    assert fake_search.queries[-1] == ("brave", {"q": "otters", "count": "3"})
    wrong = WebSearchConfig(backend="brave", brave_api_key="nope", brave_url=cfg.brave_url)
    with pytest.raises(SearchError, match="HTTP 422"):
        await search("otters", 3, wrong)


async def test_a_backend_that_does_not_answer_json_is_an_error(fake_search: FakeSearch) -> None:
    with pytest.raises(SearchError, match="did not answer JSON"):
        await search("x", 3, WebSearchConfig(backend="searxng", searxng_url=f"{fake_search.base}/broken"))
    with pytest.raises(SearchError, match="not reachable"):
        await search("x", 3, WebSearchConfig(backend="searxng", searxng_url="http://127.0.0.1:9"))


def test_a_backend_needs_its_settings() -> None:
    with pytest.raises(ValueError, match="searxng_url"):
        WebSearchConfig(backend="searxng")
    with pytest.raises(ValueError, match="brave_api_key"):
        WebSearchConfig(backend="brave")


async def test_a_turn_searches_and_the_reply_cites_the_source(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],
        fake_search: FakeSearch) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0},
                            tools={"web_search": {"backend": "searxng", "searxng_url": fake_search.base}})
    fake_anthropic.enqueue_tool_use("web_search", {"query": "sea otter range"})
    fake_anthropic.enqueue("Northern Pacific coasts [1](https://en.wikipedia.org/wiki/Sea_otter).")
    reply = await gw.handle_inbound(InboundMessage(channel="websocket", account_id="alice", conversation_id="alice",
                                                   text="where do sea otters live?", trusted=True,
                                                   timestamp=datetime.now(UTC)))
    assert reply is not None and "https://en.wikipedia.org/wiki/Sea_otter" in reply.text
    assert "web_search" in fake_anthropic.tool_names(-2) and "web_fetch" not in fake_anthropic.tool_names(-2)
    (result,) = fake_anthropic.tool_results()
    content = result["content"] if isinstance(result["content"], str) else result["content"][0]["text"]
    assert "https://en.wikipedia.org/wiki/Sea_otter" in content and not result.get("is_error")
