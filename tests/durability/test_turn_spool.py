"""The turn spool file (gateway/turn/spool.py): what it keeps survives reopening, and nothing else does."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.turn.spool import SPOOL_FILE, SpooledTurn, TurnSpool

SIZE = 64 * 1024


def turn(n: int, text: str = "") -> SpooledTurn:
    at = datetime(2026, 11, 28, 12, 0, tzinfo=UTC) + timedelta(minutes=n)
    return SpooledTurn(turn_id=f"t{n}", session_id="s1", user_id="u1", channel="websocket",
                       conversation_key="websocket:dana", speaker="Dana", text=text or f"message {n} \u2028 ünï",
                       at=at, reply=f"reply {n}", reply_at=at + timedelta(seconds=2), message_id=f"m{n}",
                       conversation_id="dana")  # fmt: skip


def opened(data: Path, size: int = SIZE) -> TurnSpool:
    spool = TurnSpool(data, size)
    assert spool.open()
    return spool


def test_the_spool_is_allocated_and_what_it_keeps_survives_reopening(tmp_path: Path) -> None:
    spool = opened(tmp_path)
    st = (tmp_path / SPOOL_FILE).stat()
    assert st.st_size == SIZE and st.st_blocks * 512 >= SIZE  # really allocated, not a sparse file
    kept = [turn(i) for i in range(3)]
    assert all(spool.add(t) for t in kept)
    spool.close()  # as a SIGKILL would: nothing more is written after an add returns
    again = opened(tmp_path)
    assert again.records == kept  # every field, the instants and the odd characters included
    assert again.end == spool.end


def test_clearing_empties_it_and_earlier_records_never_come_back(tmp_path: Path) -> None:
    spool = opened(tmp_path)
    for i in range(3):
        assert spool.add(turn(i, "long " * 50))
    spool.clear()
    assert spool.records == []
    assert b"long" not in (tmp_path / SPOOL_FILE).read_bytes()  # zeroed: no message stays behind
    assert spool.add(turn(9))  # shorter than what it overwrites: the old records after it stay on disk
    spool.close()
    assert opened(tmp_path).records == [turn(9)]


def test_a_torn_last_record_is_not_read(tmp_path: Path) -> None:
    spool = opened(tmp_path)
    assert spool.add(turn(1))
    end = spool.end
    assert spool.add(turn(2))
    spool.close()
    fd = os.open(tmp_path / SPOOL_FILE, os.O_RDWR)
    try:
        os.pwrite(fd, b"\xff" * 8, end + 20)  # the second record's payload, as a write cut short leaves it
    finally:
        os.close(fd)
    again = opened(tmp_path)
    assert again.records == [turn(1)]
    assert again.end == end  # the next record goes where the torn one was
    assert again.add(turn(3))
    again.close()
    assert opened(tmp_path).records == [turn(1), turn(3)]


def test_a_full_spool_refuses_the_turn(tmp_path: Path) -> None:
    spool = opened(tmp_path, 4096)
    added = 0
    while spool.add(turn(added, "x" * 500)):
        added += 1
    assert 0 < added < 8 and len(spool.records) == added
    assert spool.free() < 16 + len(turn(added, "x" * 500).to_json())  # the refused one did not fit
    spool.close()
    assert len(opened(tmp_path, 4096).records) == added  # and wrote nothing


def test_one_process_at_a_time_holds_the_spool(tmp_path: Path) -> None:
    first = opened(tmp_path)
    second = TurnSpool(tmp_path, SIZE)
    assert not second.open() and not second.add(turn(1))  # flock: another holder (a second daemon)
    first.close()
    assert second.open()


def test_turned_off_it_is_created_never_and_removed_once_empty(tmp_path: Path) -> None:
    assert not TurnSpool(tmp_path, 0).open() and not (tmp_path / SPOOL_FILE).exists()
    spool = opened(tmp_path)
    assert spool.add(turn(1))
    spool.close()
    off = TurnSpool(tmp_path, 0)
    assert off.open() and off.records == [turn(1)]  # still written back before it goes
    off.clear()
    off.close()
    assert not TurnSpool(tmp_path, 0).open() and not (tmp_path / SPOOL_FILE).exists()


def test_something_else_in_its_place_is_started_afresh(tmp_path: Path) -> None:
    (tmp_path / SPOOL_FILE).write_bytes(b"\0" * SIZE)  # a creation cut short before the header
    spool = opened(tmp_path)
    assert spool.records == [] and spool.add(turn(1))
