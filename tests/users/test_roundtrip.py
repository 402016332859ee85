"""export -> delete -> import: the person comes back, and recall finds the canary again."""

from __future__ import annotations

import asyncio
import json
import tarfile
import uuid
import zipfile
from pathlib import Path

import pytest

from gateway.memory.files.scopes import user_scope
from gateway.state import open_config_state
from gateway.testing import message
from tests.users.support import config_of, converse, files_with, kith, started, write_config


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_export_delete_import_recall(tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    cfg_path = write_config(tmp_path)
    config = config_of(cfg_path)
    data = Path(config.data_dir)
    canary = "KITHCANARY" + uuid.uuid4().hex[:12].upper()

    async def before() -> tuple[str, str]:
        gw = await started(config)
        try:
            return await converse(gw, canary)
        finally:
            await gw.close()

    alice, _bob = asyncio.run(before())
    archive = tmp_path / f"alice{suffix}"
    assert kith(cfg_path, "users", "export", "Alice", "-o", str(archive)) == 0
    _readable_without_kith(archive, alice, canary)

    assert kith(cfg_path, "users", "delete", alice, "--yes") == 0
    assert files_with(data, canary) == []
    capsys.readouterr()

    assert kith(cfg_path, "users", "import", str(archive), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    new = report["user_id"]
    assert new != alice and report["source_user_id"] == alice
    assert report["rows"]["turns"] == 4 and report["rows"]["kg_facts"] == 1
    # Her account comes back linked, but its approval is the operator's to give again (--approve).
    assert report["linked_accounts"] == ["websocket:alice"] and report["approved"] == []
    assert report["left_out"] == {"access_approved": 1}
    assert report["indexed"].startswith("rebuilt")

    async def after() -> None:
        gw = await started(config)
        try:
            assert gw.memory is not None
            hits = await gw.memory.recall(scope=user_scope(new), query="locker code", k=5)
            assert any(canary in h.text for h in hits)
            assert [f.object for f in gw.state.knowledge.all(new)] == [canary]
            assert gw.identities.lookup("websocket", "alice") == new  # her account is hers again
            assert not gw.state.access.is_approved("websocket", "alice")
            await gw.handle_inbound(message("back again", account="alice"))
            await gw.settle()
            assert gw.state.users.get(new) is not None and len(gw.state.users.all()) == 2
        finally:
            await gw.close()

    asyncio.run(after())
    # The imported turns are in the session log once, not appended a second time by the reconciler.
    logs = list((data / "users" / new / "sessions").glob("*.md"))
    assert sum(p.read_text().count(canary) for p in logs) == 4  # two turns, each said and echoed


def _readable_without_kith(archive: Path, user: str, canary: str) -> None:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            files = {n: zf.read(n) for n in zf.namelist()}
    else:
        with tarfile.open(archive) as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    top = f"kith-user-{user}/"
    assert all(n.startswith(top) for n in files)
    names = {n[len(top):] for n in files}
    assert {"README.md", "manifest.json", "settings.json", "accounts.json", "accounts.md", "facts.json",
            "facts.md", "transcript.jsonl", "transcript.md", "rows.json"} <= names  # fmt: skip
    assert any(n.startswith("memory/sessions/") for n in names)
    assert canary.encode() in files[top + "transcript.md"]
    assert canary.encode() in files[top + "facts.md"]
    lines = [json.loads(line) for line in files[top + "transcript.jsonl"].decode().splitlines()]
    assert any(canary in line["content"] for line in lines)
    assert json.loads(files[top + "settings.json"])["display_name"] == "Alice"
    assert b"websocket:alice" in files[top + "accounts.md"]


def test_import_refuses_to_overwrite_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path = write_config(tmp_path)
    config = config_of(cfg_path)
    canary = "KITHCANARY" + uuid.uuid4().hex[:12].upper()

    async def before() -> tuple[str, str]:
        gw = await started(config)
        try:
            return await converse(gw, canary)
        finally:
            await gw.close()

    alice, bob = asyncio.run(before())
    archive = tmp_path / "alice.tar.gz"
    assert kith(cfg_path, "users", "export", alice, "-o", str(archive)) == 0
    capsys.readouterr()
    assert kith(cfg_path, "users", "import", str(archive), "--as", bob) == 2
    assert "exists" in capsys.readouterr().err
    assert (Path(config.data_dir) / "users" / bob).is_dir()  # untouched

    assert kith(cfg_path, "users", "import", str(archive), "--as", alice, "--force", "--approve", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["user_id"] == alice and report["skipped_accounts"] == []
    assert report["approved"] == ["websocket:alice"]
    state = open_config_state(config)
    try:
        assert state.access.is_approved("websocket", "alice")
        assert [a.via for a in state.access.approved()] == ["import"]
    finally:
        state.close()
