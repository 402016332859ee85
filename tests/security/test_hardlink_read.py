"""A hard link planted in a memory tree is not a way out of it.

``O_NOFOLLOW`` and the per-component walk stop symlinks, but a hard link is a second name of the same
inode: ``ln /outside/secret users/<id>/notes.md`` looks like an ordinary file of the tree. The guarded
store refuses to read (or append to) a file with more than one link, so neither ``memory_get`` nor any
other reader can be pointed at a file outside the root this way.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gateway.memory.files.errors import PathEscapeError
from gateway.memory.files.store import MemoryStore
from gateway.types import InboundMessage
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic

SECRET = "root:$6$not-for-the-model$:19000:0:99999:7:::"


def plant_hard_link(tmp_path: Path, root: Path, rel: str) -> Path:
    outside = tmp_path / "outside" / "shadow"
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_text(SECRET + "\n")
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    os.link(outside, target)
    assert target.stat().st_nlink == 2
    return outside


def test_store_refuses_to_read_or_append_to_a_hard_link(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "root")
    outside = plant_hard_link(tmp_path, store.root, "notes/shadow.md")
    with pytest.raises(PathEscapeError, match="hard links"):
        store.read("notes/shadow.md")
    # An append reads the old content first: it must not copy the outside file into the tree.
    with pytest.raises(PathEscapeError, match="hard links"):
        store.append("notes/shadow.md", "more\n", source="test")
    assert outside.read_text() == SECRET + "\n"
    assert SECRET not in "".join(h.line for h in store.grep("root"))
    # Replacing the name is fine: the rename breaks the link and the outside file stays as it was.
    store.write("notes/shadow.md", "mine now\n", source="test")
    assert store.read("notes/shadow.md") == "mine now\n" and outside.read_text() == SECRET + "\n"


def test_a_fifo_is_refused_not_waited_for(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "root")
    os.mkfifo(store.root / "pipe.md")
    with pytest.raises(Exception, match="not a regular file"):
        store.read("pipe.md")


async def test_memory_get_cannot_read_a_hard_link_to_a_file_outside(
        tmp_path: Path, make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
        anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})

    def dm(text: str) -> InboundMessage:
        return InboundMessage(channel="websocket", account_id="alice", conversation_id="alice", text=text,
                              trusted=True, timestamp=datetime.now(UTC), raw={"tier": 2})

    await gw.handle_inbound(dm("hi"))
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None
    plant_hard_link(tmp_path, Path(gw.config.data_dir) / "users" / uid, "notes.md")

    fake_anthropic.enqueue_tool_use("memory_get", {"path": "notes.md"})
    fake_anthropic.enqueue("done")
    reply = await gw.handle_inbound(dm("read my notes"))
    assert reply is not None and reply.text == "done"
    (result,) = fake_anthropic.tool_results()
    assert result.get("is_error") and "hard links" in result["content"]
    assert "not-for-the-model" not in result["content"]
