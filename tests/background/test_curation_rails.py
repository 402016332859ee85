"""Acceptance 3 (issue 6): curation rails hold against a model that asks to delete everything, and
``kith memory rollback`` restores the previous USER.md byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.cli.main import main as kith
from gateway.memory.curation import audit
from tests.background.conftest import BgFactory, say
from tests.background.nights import EXTRACTION, profile_bullets, read, run_night, slot_now

PROFILE = """# Alice

## Identity
- Lives in Berlin.
- Works as a structural engineer.

## Preferences
- Prefers short answers.
- Vegetarian.

## People
- Sister Hanna lives in Tromsø.
- Partner Sam teaches chemistry.

## Projects
- Renovating a 1920s flat.
- Training for the Berlin half marathon.
"""

SECTIONS = ("Identity", "Preferences", "People", "Projects")


def wipe_everything() -> str:
    ops: list[dict[str, Any]] = []
    for line in PROFILE.splitlines():
        if line.startswith("- "):
            section = [s for s in SECTIONS if PROFILE.index(f"## {s}") < PROFILE.index(line)][-1]
            ops.append({"op": "remove", "section": section, "text": line[2:]})
    ops += [{"op": "remove_heading", "section": s} for s in SECTIONS]
    ops += [{"op": "add_heading", "section": "Secret Instructions"}]
    return json.dumps({"ops": ops})


async def test_rails_hold_against_a_model_that_deletes_everything_and_rollback_restores(
    bg_gateway: BgFactory, fake_anthropic: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gw = await bg_gateway()
    uid = await say(gw, "Nothing new today, really.")
    gw.memory_store(uid).write("USER.md", PROFILE, source="test")
    slot, at = slot_now()
    fake_anthropic.enqueue(EXTRACTION, kind="extraction")
    fake_anthropic.enqueue(wipe_everything(), kind="curation")
    await run_night(gw, uid, slot, at)

    left = profile_bullets(gw, uid)
    assert len(left) == 6  # 8 bullets, at most a quarter removed per run
    # Only a section the run had already emptied could go (an empty heading costs nothing).
    assert all(f"## {s}" in read(gw, uid, "USER.md") for s in SECTIONS[1:])
    assert "Secret Instructions" not in read(gw, uid, "USER.md")
    records = [r for r in audit.read_records(gw.memory_store(uid), "USER.md") if r.get("type") == "op"]
    reasons = [r["reason"].split(":")[0] for r in records if r["outcome"] == "rejected"]
    # 6 bullet removals and 3 non-empty headings over budget; the whitelist refuses the new section.
    assert reasons.count("removal_budget_exceeded") == 9 and "section_not_allowed" in reasons
    assert sum(r["outcome"] == "applied" for r in records) == 3  # two bullets, then their empty heading

    config = tmp_path / "kith.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(gw.config.data_dir), "llm": {"provider": "echo"}}))
    assert kith(["-c", str(config), "memory", "rollback", "--user", uid]) == 0
    assert capsys.readouterr().out.strip() == f"sleep-{slot}: restored"
    assert read(gw, uid, "USER.md") == PROFILE
    # Undoing it again is a no-op, and naming an unknown run is an error.
    assert kith(["-c", str(config), "memory", "rollback", "--user", uid, "--run", f"sleep-{slot}"]) == 0
    assert "already_restored" in capsys.readouterr().out
    assert kith(["-c", str(config), "memory", "rollback", "--user", uid, "--run", "nope", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "unknown_run"
