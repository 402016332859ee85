"""Distillation tiers (issue 6): the no-model short digest within its budget, mid and long on their own
backends, the operator's distillation routes (``/api/users/{uid}/distill/{tier}``, ``/api/distill``)
with a notification after a run, and ``kith distill``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from gateway.cli.main import main as kith
from gateway.http.auth import OPERATOR_TOKEN, is_operator
from gateway.memory.background.distill import short_digest
from gateway.memory.files.store import MemoryStore
from tests.background.conftest import BgFactory, say
from tests.background.nights import read
from tests.storage import select_one

TOKEN = "distill-test-token"
MID = "## Themes\n- Alice is moving to Munich in June.\n## Decisions\n- Flat in Haidhausen."
LONG = "## Who Alice is\n- Engineer, moving from Berlin to Munich (June 2024)."


def test_short_digest_keeps_the_newest_days_that_fit_in_order(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "u")
    for day in range(1, 7):
        store.write(f"sessions/2024-05-0{day}.md", f"# Sessions 2024-05-0{day}\n\n" + f"day {day} talk. " * 60,
                    source="test")  # fmt: skip
    store.write("sessions/2024-05-06-evening.md", "# Session summary\n\nThe summary of day 6.\n", source="test")
    text = short_digest(store, budget_tokens=600, now=datetime(2024, 5, 7, tzinfo=UTC))
    assert len(text) <= 600 * 4
    days = [ln[3:] for ln in text.splitlines() if ln.startswith("## ")]
    assert days == ["2024-05-04", "2024-05-05", "2024-05-06"]  # newest that fit, oldest first
    assert "The summary of day 6." in text and "day 6 talk" not in text  # a day's summary beats its raw log
    assert "### Sessions 2024-05-04" in text  # the files' own headings sit under the day


async def next_reply(client: Any) -> dict[str, Any]:
    """The next reply frame; ``state`` frames (docs/protocol.md) may come first and say nothing here."""
    while (frame := await client.recv())["type"] == "state":
        pass
    return frame  # type: ignore[no-any-return]


async def test_api_runs_tiers_on_their_backends_and_notifies(
    bg_gateway: BgFactory, fake_anthropic: Any, ws_connect: Any
) -> None:
    gw = await bg_gateway(
        server={"port": 0, "token": TOKEN},
        background={"distill": {"long": {"enabled": True, "backend": "main"}, "notify_conversation": "websocket:ops",
                                "notify_tiers": ["mid", "long"]}},
    )  # fmt: skip
    ops = await ws_connect(gw, headers={"Authorization": f"Bearer {TOKEN}"})
    await ops.hello("ops")
    await ops.ask("I'm the operator.")  # the operator's conversation is now known and reachable
    uid = await say(gw, "We're moving from Berlin to Munich in June!")
    await gw.settle()
    base = f"http://127.0.0.1:{gw.port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            async with http.post(f"{base}/api/users/{uid}/distill/short", json={}, headers=headers) as r:
                assert r.status == 401
            async with http.get(f"{base}/api/distill", headers=headers) as r:
                assert r.status == 401
        async with http.post(f"{base}/api/users/{uid}/distill/weekly", json={}, headers=auth) as r:
            assert r.status == 404 and "weekly" in (await r.json())["message"]
        async with http.post(f"{base}/api/users/nobody/distill/short", json={}, headers=auth) as r:
            assert r.status == 404
        calls = len(fake_anthropic.requests)
        async with http.post(f"{base}/api/users/{uid}/distill/short", json={}, headers=auth) as r:
            assert r.status == 202 and (await r.json())["file"] == "MEMORY_SHORT.md"
        await gw.settle()
        assert len(fake_anthropic.requests) == calls  # the short tier calls no model
        assert "moving from Berlin to Munich" in read(gw, uid, "MEMORY_SHORT.md")

        fake_anthropic.enqueue(MID, kind="distillation")
        # No body (the user in the path), still declared JSON: the CSRF rule (docs/security.md).
        json_auth = {**auth, "Content-Type": "application/json"}
        async with http.post(f"{base}/api/users/{uid}/distill/mid", headers=json_auth) as r:
            assert r.status == 202
        await gw.settle()
        notice = await next_reply(ops)
        assert notice["proactive"] and notice["notice"] and "MEMORY_MID.md" in notice["text"]
        fake_anthropic.enqueue(LONG, kind="distillation")
        async with http.post(f"{base}/api/users/{uid}/distill/long", json={}, headers=auth) as r:
            assert r.status == 202
        await gw.settle()
        assert "MEMORY_LONG.md" in (await next_reply(ops))["text"]
        async with http.get(f"{base}/api/distill?user={uid}", headers=auth) as r:
            status = await r.json()
    assert {run["tier"]: run["status"] for run in status["runs"]} == {"short": "written", "mid": "written",
                                                                     "long": "written"}  # fmt: skip
    assert status["tiers"]["long"]["backend"] == "main" and status["tiers"]["mid"]["backend"] == "cheap"
    mid_call, long_call = fake_anthropic.requests[-2:]
    assert mid_call["model"] == gw.config.llm.cheap_model and "moving from Berlin" in str(mid_call["messages"])
    assert long_call["model"] == gw.config.llm.model and "Alice is moving to Munich" in str(long_call["messages"])
    assert "Haidhausen" in read(gw, uid, "MEMORY_MID.md") and "Engineer" in read(gw, uid, "MEMORY_LONG.md")


async def test_an_oversize_digest_fails_the_job_and_keeps_the_old_file(bg_gateway: BgFactory,
                                                                     fake_anthropic: Any) -> None:  # fmt: skip
    gw = await bg_gateway()
    uid = await say(gw, "We're moving from Berlin to Munich in June!")
    await gw.settle()
    store = gw.memory_store(uid)
    store.write("MEMORY_SHORT.md", "# Recent sessions\n\n- moving to Munich\n", source="test")
    store.write("MEMORY_MID.md", "# Mid-term memory\n\n- the old digest\n", source="test")
    for _ in range(3):
        fake_anthropic.enqueue("word " * 20_000, kind="distillation")
    await gw.bus.enqueue("distill_mid", {"user_id": uid, "force": True}, job_id="distill-mid-test")
    await gw.settle()
    assert read(gw, uid, "MEMORY_MID.md") == "# Mid-term memory\n\n- the old digest\n"
    assert "distill-mid-test" in [d.job_id for d in await gw.bus.dead()]
    row = select_one(gw.state, "SELECT status FROM bg_distill WHERE user_id=? AND tier='mid'", uid)
    assert row[0] == "failed"


async def test_loopback_alone_is_not_an_operator() -> None:
    """Loopback used to be trusted without a token; behind a proxy or a rebound DNS name every
    request is loopback (issue 12), so only the operator credential counts."""
    from aiohttp import web
    from aiohttp.test_utils import make_mocked_request

    app = web.Application()
    app[OPERATOR_TOKEN] = "operator-credential-0123456789"
    for remote in ("127.0.0.1", "203.0.113.9"):
        bare = make_mocked_request("GET", "/api/distill", transport=_Transport(remote), app=app)
        assert bare.remote == remote and not is_operator(bare)
        authed = make_mocked_request("GET", "/api/distill", transport=_Transport(remote), app=app,
                                     headers={"Authorization": "Bearer operator-credential-0123456789"})
        assert is_operator(authed)


class _Transport:
    def __init__(self, host: str) -> None:
        self.host = host

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self.host, 40000) if name == "peername" else default

    def is_closing(self) -> bool:
        return False


async def test_cli_distill_short(bg_gateway: BgFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gw = await bg_gateway()
    uid = await say(gw, "Remember: the boat is at pier 17.")
    await gw.settle()
    config = tmp_path / "kith.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(gw.config.data_dir), "llm": {"provider": "echo"}}))
    # The command runs its own event loop: off this test's loop, like a shell next to the daemon.
    assert await asyncio.to_thread(kith, ["-c", str(config), "distill", "short", "--user", uid]) == 0
    assert capsys.readouterr().out.startswith("short: written MEMORY_SHORT.md")
    assert "pier 17" in read(gw, uid, "MEMORY_SHORT.md")
    assert await asyncio.to_thread(kith, ["-c", str(config), "distill", "short", "--user", uid, "--json"]) == 0
    assert '"status": "unchanged"' in capsys.readouterr().out
    assert await asyncio.to_thread(kith, ["-c", str(config), "distill", "mid", "--user", "nobody"]) == 2
