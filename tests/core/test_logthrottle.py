"""One line per kind and interval, with the number held back in between."""

from __future__ import annotations

import logging

import pytest

from gateway.util.logthrottle import LogThrottle


def test_one_line_per_kind_and_interval_with_the_held_back_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    throttle = LogThrottle(logging.getLogger("kith.test.throttle"), 60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, "kith.test.throttle")
    assert throttle.warn("host", "refused Host %r", "evil.example")
    for _ in range(1000):
        assert not throttle.warn("host", "refused Host %r", "evil.example")
    assert throttle.warn("origin", "refused Origin %r", "null")  # another kind has its own interval
    now[0] = 61.0
    assert throttle.warn("host", "refused Host %r", "evil.example")
    assert [r.getMessage() for r in caplog.records] == [
        "refused Host 'evil.example'",
        "refused Origin 'null'",
        "refused Host 'evil.example' (and 1000 more since the last line)",
    ]
