"""/remember and /forget on every channel: Telegram, Discord and Nextcloud Talk through their fake
platforms speaking the real wire protocols, and the real Gateway behind them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.memory.edit.remember import REL
from tests.channels.rig import ADA_DC, ADA_TG, Rig, start_rig


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    rig = await start_rig(tmp_path)
    yield rig
    await rig.stop()


async def test_remember_and_forget_answer_on_each_channel(rig: Rig) -> None:
    await rig.tg_say("/remember the telegram canary is otter-1")
    await rig.dc_say("/remember the discord canary is otter-2")
    assert await rig.nc_say("/remember the nextcloud canary is otter-3") == 200
    (tg,) = await rig.tg.wait_sent(1)
    (dc,) = await rig.dc.wait_created(1)
    (nc,) = await rig.nc.wait_posts(1)
    assert "Remembered: the telegram canary is otter-1" in tg.text
    assert "Remembered: the discord canary is otter-2" in dc.content
    assert "Remembered: the nextcloud canary is otter-3" in nc.message
    assert rig.turns() == 0, "commands never reach the model or the transcript"

    uid = rig.gw.identities.lookup("telegram", str(ADA_TG))
    assert uid is not None
    store = rig.gw.memory_store(uid)
    assert "otter-1" in store.read(REL)
    await rig.tg_say("/forget telegram canary is otter-1")
    sent = await rig.tg.wait_sent(2)
    assert "Forgotten: 1 line" in sent[-1].text and "otter-1" in sent[-1].text
    assert "otter-1" not in store.read(REL)
    dc_uid = rig.gw.identities.lookup("discord", str(ADA_DC))
    assert dc_uid is not None and "otter-2" in rig.gw.memory_store(dc_uid).read(REL)
