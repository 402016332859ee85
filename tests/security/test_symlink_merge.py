"""A user merge never reads through, writes through or deletes through a symlink.

Before the fix ``Identities._merge_tree`` used ``Path.exists``/``open``/``replace``: a symlinked file in
the surviving user's tree was appended to (a file outside the data dir grew the merged user's log), a
symlinked directory in it received the merged user's files, and a check-then-use window let a file be
swapped for a symlink. Now both trees go through the guarded store: symlinks in the source are never
read, symlinks in the destination are never written through, nothing is lost, and the source tree is
removed without following anything.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.memory.files.store import MemoryEntry, MemoryStore
from gateway.memory.files.treemerge import merge_tree
from gateway.types import InboundMessage
from tests.conftest import GatewayFactory

SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def dm(channel: str, account: str, text: str) -> InboundMessage:
    return InboundMessage(channel=channel, account_id=account, conversation_id=account, text=text, trusted=True,
                          timestamp=datetime.now(UTC))


def outside(tmp_path: Path) -> dict[str, Path]:
    """Files and a directory outside the data dir that a symlink in a user's tree points to."""
    base = tmp_path / "outside"
    (base / "dir").mkdir(parents=True)
    (base / "secret.env").write_text(SECRET + "\n")
    (base / "dir" / "creds.md").write_text(SECRET + " (in a directory)\n")
    (base / "bashrc").write_text("# the operator's shell profile\n")
    (base / "sessions").mkdir()
    return {"secret": base / "secret.env", "dir": base / "dir", "bashrc": base / "bashrc",
            "sessions": base / "sessions"}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def two_users(gw: Gateway) -> tuple[str, str, Path]:
    await gw.handle_inbound(dm("websocket", "laptop", "I'm on my laptop"))
    await gw.handle_inbound(dm("telegram", "4242", "and this is my phone"))
    await gw.settle()
    into = gw.identities.lookup("websocket", "laptop")
    source = gw.identities.lookup("telegram", "4242")
    assert into and source and into != source
    return into, source, Path(gw.config.data_dir) / "users"


async def test_symlinks_in_the_merged_tree_are_not_read(tmp_path: Path, make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    ext = outside(tmp_path)
    before = snapshot(tmp_path / "outside")
    into, source, users = await two_users(gw)
    src = users / source
    os.symlink(ext["secret"], src / "notes.md")  # a symlinked file
    os.symlink(ext["dir"], src / "people")  # a symlinked directory
    (src / "journal").mkdir()
    os.symlink(ext["secret"], src / "journal" / "2026.jsonl")  # deeper, with a log suffix

    await gw.merge_users(into=into, source=source)

    merged = snapshot(users / into)
    assert not any(SECRET.encode() in body for body in merged.values()), "a symlink target was read into the tree"
    assert not (users / into / "people").exists() and not (users / into / "notes.md").exists()
    assert not src.exists() and not src.is_symlink(), "the source tree is removed"
    assert snapshot(tmp_path / "outside") == before, "nothing outside was changed or deleted"
    log = next((users / into / "sessions").glob("*.md")).read_text()
    assert "I'm on my laptop" in log and "and this is my phone" in log


async def test_symlinks_in_the_surviving_tree_are_not_written_through(
        tmp_path: Path, make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    ext = outside(tmp_path)
    before = snapshot(tmp_path / "outside")
    into, source, users = await two_users(gw)
    dst, src = users / into, users / source
    (src / "profile.md").write_text("Phone notes: likes rye bread.\n")
    (src / "TASKS.json").write_text('{"tasks": []}\n')
    os.symlink(ext["bashrc"], dst / "profile.md")  # the survivor's file is a symlink to a file outside
    os.symlink(ext["bashrc"], dst / "TASKS.json")
    (src / "archive").mkdir()
    (src / "archive" / "old.md").write_text("An old note from the phone.\n")
    os.symlink(ext["sessions"], dst / "archive")  # the survivor's directory is a symlink outside

    await gw.merge_users(into=into, source=source)

    assert snapshot(tmp_path / "outside") == before, "a merge wrote through a symlink"
    assert list(ext["sessions"].iterdir()) == []
    # Nothing is lost: the phone's notes went beside the symlink, the file under the symlinked
    # directory stayed in the source tree (which is therefore kept).
    assert (dst / "profile.2.md").read_text() == "Phone notes: likes rye bread.\n"
    assert (dst / "TASKS.2.json").read_text() == '{"tasks": []}\n'
    assert (src / "archive" / "old.md").read_text() == "An old note from the phone.\n"
    assert not (src / "profile.md").exists(), "what arrived is removed from the source"
    assert (dst / "profile.md").is_symlink() and (dst / "TASKS.json").is_symlink(), "not ours to remove"


def test_a_file_swapped_for_a_symlink_after_the_walk_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window between listing a file and reading it: the read is O_NOFOLLOW on every component."""
    ext = outside(tmp_path)
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sessions").mkdir(parents=True)
    (src / "sessions" / "2026-05-09.md").write_text("real log\n")
    (src / "b.md").write_text("b\n")
    dst.mkdir()

    from gateway.memory.files import treemerge

    real_files = treemerge.MemoryStore.files

    def files_then_swap(self: MemoryStore, rel: str = "") -> list[MemoryEntry]:
        listed = real_files(self, rel)
        if self.root == src.resolve():  # the attacker wins the race right after the walk
            (src / "b.md").unlink()
            os.symlink(ext["secret"], src / "b.md")
            (src / "sessions" / "2026-05-09.md").rename(src / "moved.md")
            os.rename(src / "sessions", src / "sessions.real")
            os.symlink(ext["dir"], src / "sessions")
        return listed

    # The real walk, then the swap: a deterministic stand-in for a process racing the merge.
    monkeypatch.setattr(treemerge.MemoryStore, "files", files_then_swap)
    report = merge_tree(src, dst, max_file_bytes=64 * 1024, label="race")
    assert set(report.failed) == {"b.md", "sessions/2026-05-09.md"}
    assert not any(SECRET.encode() in body for body in snapshot(dst).values())
    assert (ext["secret"]).read_text() == SECRET + "\n" and (ext["dir"] / "creds.md").exists()


def test_logs_past_the_cap_continue_in_parts_and_lose_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sessions").mkdir(parents=True)
    (dst / "sessions").mkdir(parents=True)
    (dst / "sessions" / "2026-05-09.md").write_text("# Sessions 2026-05-09\n" + "laptop line\n" * 150)
    (src / "sessions" / "2026-05-09.md").write_text("# Sessions 2026-05-09\n" + "phone line\n" * 150)
    (src / "big.md").write_text("".join(f"hand-edited line {i}\n" for i in range(300)))  # over the cap
    report = merge_tree(src, dst, max_file_bytes=2048, label="cap")
    assert not report.failed and report.removed_source and not src.exists()
    assert report.renamed == {"sessions/2026-05-09.md": "sessions/2026-05-09.2.md"}
    assert (dst / "sessions" / "2026-05-09.2.md").read_text().count("phone line") == 150
    parts = sorted(dst.glob("big*.md"))
    assert len(parts) > 1 and all(p.stat().st_size <= 2048 for p in parts)
    text = "".join(p.read_text() for p in [dst / "big.md", *sorted(dst.glob("big.*.md"),
                                                                     key=lambda p: int(p.name.split(".")[1]))])
    assert text == "".join(f"hand-edited line {i}\n" for i in range(300))
    audit = (dst / ".audit.jsonl").read_text()
    assert '"source": "merge:cap"' in audit, "every merged write is audited"


def test_a_symlinked_audit_log_is_not_written_through(tmp_path: Path) -> None:
    """A symlink planted as ``.audit.jsonl`` must not receive a line per guarded write."""
    from gateway.memory.files.errors import PathEscapeError
    from gateway.memory.files.store import MemoryStore

    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    root = tmp_path / "root"
    root.mkdir()
    store = MemoryStore(root)
    store.audit_path.symlink_to(outside)
    with pytest.raises(PathEscapeError):
        store.write("notes.md", "hello\n", source="test")
    assert outside.read_text() == "precious\n"
