"""The daemon on each state backend (``state.url``): turns are stored, and a person is exported,
erased and imported back through ``PeopleStore`` (gateway/identity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.identity.erase import erase_person
from gateway.identity.export import export_user
from gateway.identity.import_ import import_user
from gateway.state.postgres import PostgresState
from gateway.state.sqlite import SqliteState
from gateway.types import InboundMessage
from tests.conftest import make_config


def _config(tmp_path: Path, state_url: str | None) -> Any:
    return make_config(tmp_path, state={"url": state_url} if state_url else {})


async def test_turns_export_erase_import(tmp_path: Path, state_url: str | None) -> None:
    cfg = _config(tmp_path, state_url)
    async with Gateway(cfg, entry_points=False, serve_http=False, supervise=False) as gw:
        assert isinstance(gw.state, PostgresState if state_url else SqliteState)
        for i, text in enumerate(["my cat is called Miso", "and my dog Pepper"]):
            message = InboundMessage(channel="websocket", account_id="alice", conversation_id="alice", text=text,
                                     trusted=True, message_id=f"m{i}")  # fmt: skip
            assert await gw.handle_inbound(message) is not None
        alice = gw.identities.lookup("websocket", "alice")
        assert alice is not None
        sessions = gw.state.sessions.of_user(alice)
        assert len(sessions) == 1
        assert gw.state.turns.count_after(sessions[0].session_id, 0, role="user") == 2
        assert gw.state.turns.search_sessions(alice, "Pepper") == [sessions[0].session_id]

        archive = tmp_path / "alice.tar.gz"
        export_user(gw.state, Path(cfg.data_dir), alice, archive)
        report = await erase_person(gw, alice)
        assert report.rows.get("turns", 0) >= 4  # two messages and two replies
        assert gw.state.users.get(alice) is None and gw.state.people.rows(alice) == {}
        assert gw.state.turns.search_sessions(alice, "Pepper") == []

        back = import_user(gw.state, Path(cfg.data_dir), archive, as_user="alice2")
        assert back.user_id == "alice2"
        [restored] = gw.state.sessions.of_user("alice2")
        assert [r.content for r in gw.state.turns.history(restored.session_id, 10) if r.role == "user"] == [
            "my cat is called Miso", "and my dog Pepper"]
