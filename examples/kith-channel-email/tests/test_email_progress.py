"""The mailbox's progress: a low-water mark over IMAP UIDs that mails finishing out of order never pass."""

from __future__ import annotations

from kith_channel_email.progress import UidMark


def test_the_mark_stays_below_the_lowest_mail_still_handled() -> None:
    mark = UidMark(100)
    assert mark.new([100, 101, 103, 102, 99]) == [101, 102, 103]
    for uid in (101, 102, 103):
        mark.start(uid)
    assert mark.new([101, 102, 103, 104]) == [104]
    assert mark.finish(102) is False and mark.done_to == 100  # 101 still runs
    assert mark.finish(101) is True and mark.done_to == 102
    assert mark.finish(103) is True and mark.done_to == 103
    mark.start(110)  # UIDs have gaps (expunged mail)
    assert mark.finish(110) is True and mark.done_to == 110
