"""Issue 27, item 6: a message's dedupe key is never stored without its reply.

The two-node chaos run counted a message as answered with no reply stored: the node was SIGKILLed
after the turn's dedupe key was committed and before its reply was. The client sent the message
again, the other node found the key, and dropped the message as one already answered. Now the key
commits in the reply's transaction: a process dying before that commit leaves neither, and the
message sent again is answered and stored. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.testing import message
from tests.conftest import make_config
from tests.storage import select_rows


class Killed(BaseException):
    """The process dying at this point: nothing after it runs, and nothing catches it as an error
    (a transaction open at that moment is rolled back, as the database does for a killed client)."""


async def test_a_message_sent_again_after_a_kill_before_its_reply_was_stored_is_answered(
    tmp_path: Path, state_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = make_config(tmp_path, state={"url": state_url} if state_url else {})
    sent = dataclasses.replace(message("where did I park?", account="ada"), message_id="ada:m1")
    async with Gateway(cfg, entry_points=False) as gw:
        assert (await gw.handle_inbound(message("hello", account="ada"))) is not None

        def die(*args: Any, **kwargs: Any) -> None:
            raise Killed

        monkeypatch.setattr(gw.sessions, "record", die)  # dies storing the reply: after the model answered
        with pytest.raises(Killed):
            await gw.handle_inbound(sent)
        monkeypatch.undo()

    async with Gateway(cfg, entry_points=False) as gw:  # restarted (or the other node): no key in memory
        reply = await gw.handle_inbound(sent)
        assert reply is not None and not reply.notice, "answered, not dropped as a duplicate"
        rows = select_rows(gw.state, "SELECT turn_id, role FROM turns WHERE content=? OR turn_id=?",
                           "where did I park?", reply.turn_id)  # fmt: skip
        assert ("assistant" in [r[1] for r in rows if r[0] == reply.turn_id]), rows
        assert gw.state.dedupe.seen("websocket", "ada:m1")
        assert (await gw.handle_inbound(sent)) is None, "and now it is answered: a third copy is dropped"
