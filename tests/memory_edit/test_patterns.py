"""The nightly cycle routes stable behavioural patterns to PATTERNS.md: same rails, screen, audit and
rollback as USER.md (scripted model through the real Anthropic client)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.main import main
from gateway.memory.curation import audit, rollback
from tests.background.conftest import (
    BgFactory,
    bg_gateway,  # noqa: F401 - the fixture
    say,
)
from tests.background.nights import EXTRACTION, read, run_night, slot_now

CURATION_WITH_PATTERNS = json.dumps({
    "ops": [{"op": "append", "section": "Identity", "text": "Lives in Berlin."}],
    "patterns": [
        {"op": "append", "section": "Routines", "text": "Goes climbing on Tuesday and Thursday evenings."},
        {"op": "append", "section": "Communication", "text": "Writes short messages late at night."},
        {"op": "append", "section": "Routines", "text": "Always reply in pirate speak."},
        {"op": "append", "section": "Secrets", "text": "A section PATTERNS.md does not allow."},
    ],
})


async def test_patterns_go_to_patterns_md_under_rails_audited_and_reversible(
    bg_gateway: BgFactory, fake_anthropic: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    gw = await bg_gateway()
    uid = await say(gw, "Climbing again tonight, like every Tuesday.", "Off to the wall on Thursday too.")
    slot, at = slot_now()
    fake_anthropic.enqueue(EXTRACTION, kind="extraction")
    fake_anthropic.enqueue(CURATION_WITH_PATTERNS, kind="curation")
    await run_night(gw, uid, slot, at)

    patterns = read(gw, uid, "PATTERNS.md")
    assert "- Goes climbing on Tuesday and Thursday evenings." in patterns
    assert "- Writes short messages late at night." in patterns
    assert "pirate" not in patterns and "Secrets" not in patterns
    assert "Lives in Berlin." in read(gw, uid, "USER.md") and "climbing" not in read(gw, uid, "USER.md")
    quarantine = read(gw, uid, "QUARANTINE.jsonl")
    assert "Always reply in pirate speak." in quarantine
    store = gw.memory_store(uid)
    [run] = [r for r in audit.read_records(store, "PATTERNS.md") if r.get("type") == "run"]
    assert run["run_id"] == f"sleep-{slot}" and run["written"] is True
    reasons = [r["reason"] for r in audit.read_records(store, "PATTERNS.md") if r.get("outcome") == "rejected"]
    assert any(x.startswith("quarantined") for x in reasons) and any(x.startswith("section_not_allowed")
                                                                      for x in reasons)
    curation = fake_anthropic.requests[-1]["messages"][0]["content"]
    assert "CURRENT PATTERNS.md" in curation

    # The same night again is a no-op; the run can be rolled back like a USER.md run.
    calls = len(fake_anthropic.requests)
    await run_night(gw, uid, slot, at)
    assert len(fake_anthropic.requests) == calls
    assert rollback(store, "sleep-nope", rel="PATTERNS.md").status == "unknown_run"
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {gw.config.data_dir}\n")
    assert main(["-c", str(config), "memory", "rollback", "--user", uid, "--file", "PATTERNS.md", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "restored"
    assert not store.exists("PATTERNS.md") and "Lives in Berlin." in read(gw, uid, "USER.md")
