"""Issue 28, "Forgetting leaves nothing behind": a canary the person told kith, forgotten, then a night
and a restart; a raw byte scan of the whole data dir (SQLite and its WAL, the index, the bus's log,
the memory trees, the logs) finds it only in the undo store (``<root>/.forgotten/``), and once the undo
window has closed (the daily retention job), nowhere."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.memory.edit.forget import forget
from gateway.memory.edit.undo import KEEP_DAYS
from gateway.testing import message
from tests.background.nights import CURATION, EXTRACTION, bullets, read, run_night
from tests.users.support import files_with, started


async def test_a_forgotten_canary_is_only_in_the_undo_store_after_a_night_and_a_restart(
    tmp_path: Path, make_gateway: Any, anthropic_llm: dict[str, Any], fake_anthropic: Any
) -> None:
    canary = "KITHFORGET" + uuid.uuid4().hex[:10].upper()
    gw = await make_gateway(llm=anthropic_llm, background={"writer": {"turn_threshold": 1000, "idle_seconds": 3600}})
    data = Path(gw.config.data_dir)
    await gw.handle_inbound(message(f"my locker code is {canary}, please remember it", account="alice"))
    await gw.handle_inbound(message("and the garden meeting moved to thursday", account="alice"))
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None
    await gw.settle()
    assert files_with(data, canary), "the conversation must have stored the canary"

    report = await forget(gw, uid, text=canary, actor="test", confirm=True)
    assert report.status == "removed", report
    at = datetime.now(UTC) + timedelta(minutes=1)
    # A real night: an extraction answer that parses, or the job would only wait for its retry.
    fake_anthropic.enqueue(EXTRACTION, kind="extraction")
    fake_anthropic.enqueue(CURATION, kind="curation")
    await run_night(gw, uid, at.strftime("%Y-%m-%dT%H:%M"), at.isoformat())
    assert bullets(read(gw, uid, f"memories/{at.date().isoformat()}.md")), "the night wrote its memories"
    config = gw.config
    await gw.close()
    again = await started(config)
    await again.settle()
    await again.close()

    left = files_with(data, canary)
    assert [f for f in left if "/.forgotten/" not in f] == [], left
    assert left, "the undo record keeps it while /forget undo can still bring it back"

    # The undo window closes: the person's daily retention job deletes the record.
    undo = data / next(f for f in left if "/.forgotten/" in f)
    old = time.time() - (KEEP_DAYS + 1) * 86400
    os.utime(undo, (old, old))
    gw = await started(config)
    assert gw.bus is not None
    await gw.bus.enqueue("retention", {"user_id": uid, "slot": "x", "tz": "UTC"}, job_id="retention-test")
    await gw.settle()
    await gw.close()
    assert files_with(data, canary) == []

