"""Phrases into rules (said back in words), stored rules read back, and the walk across DST for
hourly and cron rules."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from gateway.schedule.rules import RuleError, latest_due, next_occurrence, parse_phrase, parse_stored
from gateway.schedule.zones import zone

PHRASES = [
    ("every weekday at 8", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=0", "every weekday at 08:00"),
    ("on Sunday evenings", "FREQ=WEEKLY;BYDAY=SU;BYHOUR=18;BYMINUTE=0", "every Sunday at 18:00"),
    ("every Sunday evening at 7", "FREQ=WEEKLY;BYDAY=SU;BYHOUR=19;BYMINUTE=0", "every Sunday at 19:00"),
    ("every 2 weeks on Tuesday at 10:30", "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=10;BYMINUTE=30",
     "every 2 weeks on Tuesday at 10:30"),
    ("every month on the 1st at 9am", "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0",
     "every month on the 1st at 09:00"),
    ("daily at 6pm", "FREQ=DAILY;BYHOUR=18;BYMINUTE=0", "every day at 18:00"),
    ("every Monday and Thursday at 12am", "FREQ=WEEKLY;BYDAY=MO,TH;BYHOUR=0;BYMINUTE=0",
     "every Monday and Thursday at 00:00"),
    ("hourly", "FREQ=HOURLY;BYMINUTE=0", "every hour at minute 00"),
    ("every day", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0", "every day at 09:00"),  # no time: 09:00, said back
]


@pytest.mark.parametrize(("phrase", "expr", "words"), PHRASES)
def test_phrases(phrase: str, expr: str, words: str) -> None:
    rec = parse_phrase(phrase, today=date(2026, 6, 1))
    assert rec.kind == "rrule" and rec.expr.startswith(expr)
    assert rec.describe() == words
    assert parse_phrase(rec.describe(), today=date(2026, 6, 1)).expr == rec.expr  # what is shown reads back


@pytest.mark.parametrize("bad", ["now and then", "every day at 25:00", "every month on the 32nd", "", "sometimes"])
def test_phrases_that_are_not_understood(bad: str) -> None:
    with pytest.raises(RuleError):
        parse_phrase(bad)


def test_stored_rules_and_cron() -> None:
    assert parse_stored("cron:0 8 * * 1-5").kind == "cron"
    assert parse_stored("rrule:FREQ=DAILY;BYHOUR=7").expr == "FREQ=DAILY;BYHOUR=7"
    with pytest.raises(RuleError):
        parse_stored("cron:0 8 * *")
    with pytest.raises(RuleError):
        parse_stored("rrule:FREQ=SOMETIMES")


def test_hourly_on_the_spring_forward_day_runs_once_fewer() -> None:
    berlin = zone("Europe/Berlin")
    rec = parse_phrase("hourly")
    t, fired = datetime(2026, 3, 28, 23, 0, tzinfo=UTC), []  # 00:00 CET, 29 March
    while t < datetime(2026, 3, 29, 5, 0, tzinfo=UTC):
        nxt = next_occurrence(rec, berlin, t)
        assert nxt is not None
        fired.append(nxt)
        t = nxt
    local = [f.astimezone(berlin).strftime("%H:%M") for f in fired]
    assert local == ["01:00", "03:00", "04:00", "05:00", "06:00", "07:00"]  # 02:00 does not exist
    assert len(set(fired)) == len(fired)


def test_a_cron_rule_fires_once_on_fall_back() -> None:
    ny = zone("America/New_York")
    rec = parse_stored("cron:30 1 * * *")
    first = next_occurrence(rec, ny, datetime(2026, 10, 31, 12, tzinfo=UTC))
    second = next_occurrence(rec, ny, first)  # type: ignore[arg-type]
    assert first == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # the first 01:30 (EDT)
    assert second == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)  # next day, not the second 01:30
    # after three days down, the latest missed occurrence only
    assert latest_due(rec, ny, datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 3, 12, tzinfo=UTC)) == \
        datetime(2026, 11, 3, 6, 30, tzinfo=UTC)


def test_a_line_whose_words_are_its_rule_keeps_the_exact_rule() -> None:
    from gateway.schedule.items import parse_reminders

    now = datetime(2026, 6, 1, tzinfo=UTC)
    text = ('- [ ] every year on the 5th of month 6 at 09:00 (UTC) birthday <!-- reminder id=r1 '
            'rule="rrule:FREQ=YEARLY;BYMONTH=6;BYMONTHDAY=5;BYHOUR=9;BYMINUTE=0" since=2026-06-01T00:00:00Z -->\n'
            "- [ ] on the cron schedule '0 8 * * 1-5' (UTC) cron one <!-- reminder id=r2 rule=\"cron:0 8 * * 1-5\" "
            "since=2026-06-01T00:00:00Z -->\n")
    parsed = parse_reminders(text, "UTC", now)
    assert not parsed.problems and parsed.text == text  # nothing rewritten
    yearly, cron = parsed.items
    assert yearly.next_due(zone("UTC"), now) == datetime(2026, 6, 5, 9, tzinfo=UTC)
    assert cron.rule is not None and cron.rule.kind == "cron"
    edited = parse_reminders(text.replace("every year on the 5th of month 6 at 09:00", "every day at 10"), "UTC", now)
    assert edited.items[0].rule is not None and edited.items[0].rule.expr.startswith("FREQ=DAILY;BYHOUR=10")
