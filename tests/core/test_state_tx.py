"""``State.tx`` reports the error that broke a transaction, not a failed second ROLLBACK."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.state import open_state
from gateway.state.sqlite import SqliteState


def test_an_error_after_sqlite_rolled_back_by_itself_is_not_masked(tmp_path: Path) -> None:
    state = open_state(tmp_path / "state.sqlite")
    assert isinstance(state, SqliteState)
    try:
        with pytest.raises(ValueError, match="the real error"), state.tx():
            state.db.execute("ROLLBACK")  # what SQLite does by itself on SQLITE_FULL / SQLITE_IOERR
            raise ValueError("the real error")
        assert not state.db.in_transaction
        with state.tx():  # the connection is usable afterwards
            state.db.execute("INSERT INTO dedupe(channel, message_id, created_at) VALUES ('t', 'm', '2026-01-01')")
        assert state.dedupe.seen("t", "m")
    finally:
        state.close()
