"""``kith schedule list | show | cancel`` over a data directory a gateway wrote (no daemon running)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.schedule.items import CRONS, REMINDERS
from gateway.testing import message
from tests.users.support import config_of, kith, write_config


async def test_list_show_cancel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path)
    async with Gateway(config_of(cfg), serve_http=False, supervise=False, run_jobs=False) as gw:
        await gw.handle_inbound(message("hi", account="alice", name="Alice"))
        uid = gw.identities.lookup("websocket", "alice")
        assert uid is not None
        gw.state.users.set_timezone(uid, "Europe/Berlin")
        store = gw.memory_store(uid)
        store.write(REMINDERS, "- [ ] every day at 7: stretch\n- [ ] no time here\n", source="test")
        store.write(CRONS, json.dumps({"crons": [{"id": "c1", "when": "every Sunday evening",
                                                  "prompt": "ask me about my week"}]}), source="test")
    capsys.readouterr()
    assert kith(cfg, "schedule", "list", "--user", "websocket:alice", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["timezone"] == "Europe/Berlin"
    assert {i["kind"]: i["when"] for i in out["items"]} == {"reminder": "every day at 07:00",
                                                            "prompt": "every Sunday at 18:00"}
    assert [p["line"] for p in out["problems"]] == [2]
    assert kith(cfg, "schedule", "list") == 0
    assert uid in capsys.readouterr().out
    assert kith(cfg, "schedule", "show", "c1", "--user", uid) == 0
    assert "ask me about my week" in capsys.readouterr().out
    assert kith(cfg, "schedule", "cancel", "c1", "--user", uid) == 0
    assert "cancelled prompt c1" in capsys.readouterr().out
    crons = json.loads((tmp_path / "data" / "users" / uid / CRONS).read_text())["crons"]
    assert crons[0]["enabled"] is False
    assert kith(cfg, "schedule", "cancel", "c1", "--user", uid) == 2  # nothing active by that id
    assert kith(cfg, "schedule", "show", "nope", "--user", "nobody-at-all") == 2
