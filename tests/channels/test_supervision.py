"""Supervised reconnects through the real Gateway: a stalled poller, a dropped or silent gateway,
a revoked token that stops only its own adapter."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from tests.channels.rig import start_rig, wait_for


async def test_stalled_telegram_poller_is_restarted_by_the_watchdog(tmp_path: Path) -> None:
    rig = await start_rig(tmp_path, telegram={"stall_after_s": 1.5})
    try:
        before = rig.health("telegram")["restarts"]
        rig.tg.stalled = True  # getUpdates hangs: the connection is open, nothing comes back
        await wait_for(lambda: rig.health("telegram")["restarts"] > before, timeout=20, what="watchdog restart")
        assert "no activity" in rig.health("telegram")["last_error"]
        rig.tg.stalled = False
        await rig.tg_say("are you back?")
        (sent,) = await rig.tg.wait_sent(1, timeout=30)
        assert "echo: are you back?" in sent.text
        assert rig.health("telegram")["state"] == "running"
    finally:
        await rig.stop()


async def test_dropped_discord_gateway_resumes_and_silent_one_is_restarted(tmp_path: Path) -> None:
    rig = await start_rig(tmp_path, discord={"stall_after_s": 2})
    try:
        await rig.dc.drop()  # connection closed under the client
        await rig.dc_say("sent while disconnected")  # queued for the RESUME replay
        (created,) = await rig.dc.wait_created(1, timeout=20)
        assert "sent while disconnected" in created.content and rig.dc.resumes >= 1

        before = rig.health("discord")["restarts"]
        identifies = rig.dc.identifies
        rig.dc.silent = True  # zombie: socket open, no heartbeat ACKs, no events
        await wait_for(lambda: rig.health("discord")["restarts"] > before, timeout=20, what="watchdog restart")
        rig.dc.silent = False
        await wait_for(lambda: rig.dc.identifies > identifies and rig.dc._ready.is_set(), timeout=20,
                       what="new session")
        await rig.dc_say("after the restart")
        await rig.dc.wait_created(2, timeout=20)
        assert "after the restart" in rig.dc.created[-1].content
        assert rig.health("discord")["state"] == "running"
    finally:
        await rig.stop()


async def test_revoked_token_stops_only_that_adapter(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    rig = await start_rig(tmp_path)
    try:
        rig.tg.revoke()
        await wait_for(lambda: rig.health("telegram")["state"] == "failed", timeout=20, what="telegram failed")
        assert "authentication" in rig.health("telegram")["last_error"]
        # the others keep serving
        await rig.dc_say("still there?")
        assert await rig.nc_say("still there?") == 200
        await rig.dc.wait_created(1)
        await rig.nc.wait_posts(1)
        health = json.loads(await (await rig.http.get(f"{rig.base}/healthz")).text())
        states = {name: health["adapters"][name]["state"] for name in ("telegram", "discord", "nextcloud")}
        assert states == {"telegram": "failed", "discord": "running", "nextcloud": "running"}
        await asyncio.sleep(0.5)
        assert rig.health("telegram")["state"] == "failed"  # not retried in a loop
        # the Discord token is rejected by its gateway with 4004: that adapter stops too
        rig.dc.reject_token = True
        await rig.dc.drop()
        await wait_for(lambda: rig.health("discord")["state"] == "failed", timeout=20, what="discord failed")
        assert rig.health("nextcloud")["state"] == "running"
        from tests.channels.rig import DC_TOKEN, TG_TOKEN

        assert TG_TOKEN not in caplog.text and DC_TOKEN not in caplog.text
    finally:
        await rig.stop()
