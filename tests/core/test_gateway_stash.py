"""Per-gateway state lives in ``gateway.stash``: two gateways in one process (tests, a ``kith worker``
next to a daemon) never share it. These once-per-interval warnings used to live in module-level
dicts, so the first gateway to warn silenced every other one in the process."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gateway.personas import resolve
from gateway.types import InboundMessage
from tests.conftest import make_config


async def test_a_missing_persona_is_warned_about_once_per_gateway(
    make_gateway: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    one = await make_gateway(config=make_config(tmp_path / "one"))
    two = await make_gateway(config=make_config(tmp_path / "two"))
    with caplog.at_level(logging.WARNING, logger="kith"):
        for gw in (one, one, two):
            assert resolve(gw, "ghost") == gw.config.personas.default
    warnings = [r for r in caplog.records if "persona 'ghost' does not exist" in r.getMessage()]
    assert len(warnings) == 2, "once in each gateway"


def _stranger(account: str) -> InboundMessage:
    return InboundMessage(channel="telegram", account_id=account, text="hi", conversation_id=account)


async def test_pairing_pressure_is_warned_about_in_each_gateway(
    make_gateway: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def gateway_config(name: str) -> Any:
        return make_config(tmp_path / name, channels={"telegram": {"pairing_max_pending": 1}})

    one = await make_gateway(config=gateway_config("one"))
    two = await make_gateway(config=gateway_config("two"))
    with caplog.at_level(logging.WARNING, logger="kith.access"):
        for gw in (one, two):
            for account in ("1", "2", "3"):  # the second stranger already finds the queue full
                await gw.handle_inbound(_stranger(account))
    warnings = [r for r in caplog.records if "is turning strangers away" in r.getMessage()]
    assert len(warnings) == 2, "once per interval in each gateway"
