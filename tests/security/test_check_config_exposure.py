"""Issue 12, item 3: ``kith check-config`` (and ``kith run``, which validates the same way) refuse a
configuration that exposes the daemon beyond this machine without ``server.token``: a non-loopback
bind, or Telegram webhook mode, whose caller (Telegram) only reaches public URLs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.common import load_or_exit
from gateway.cli.main import build_parser, main
from gateway.cli.run import run as run_command

TELEGRAM = {"enabled": True, "token": "123:abc", "mode": "webhook", "webhook_secret": "Secret_0123456789"}


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], **sections: Any) -> tuple[int, str]:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "data"), **sections}))
    code = main(["check-config", str(path)])
    captured = capsys.readouterr()
    return code, captured.err + captured.out


@pytest.mark.parametrize("telegram", [
    {"webhook_url": "https://bot.example.org/telegram/webhook"},
    {"webhook_url": "https://203.0.113.5:8443/telegram/webhook"},
    {},  # webhook registered outside kith: the real Bot API only calls public URLs
])
def test_a_public_telegram_webhook_needs_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], telegram: dict[str, Any]
) -> None:
    code, out = _check(tmp_path, capsys, channels={"telegram": {**TELEGRAM, **telegram}})
    assert code == 2
    assert "server.token: required when Telegram calls a public webhook" in out and "security.md#proxies" in out
    code, out = _check(tmp_path, capsys, server={"token": "a-long-operator-token-0123456789"},
                       channels={"telegram": {**TELEGRAM, **telegram}})
    assert code == 0, out


@pytest.mark.parametrize("telegram", [
    {"mode": "polling"},  # polling exposes nothing
    {"webhook_url": "http://127.0.0.1:8081/telegram/webhook"},  # a local Bot API server calls loopback
    {"base_url": "http://localhost:8081"},
])
def test_telegram_without_public_exposure_needs_no_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], telegram: dict[str, Any]
) -> None:
    code, out = _check(tmp_path, capsys, channels={"telegram": {**TELEGRAM, **telegram}})
    assert code == 0, out


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "kith.lan"])
def test_a_non_loopback_bind_needs_a_token(tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str) -> None:
    code, out = _check(tmp_path, capsys, server={"host": host})
    assert code == 2 and f"server.token: required when server.host ({host}) is not loopback" in out
    code, out = _check(tmp_path, capsys, server={"host": host, "token": "a-long-operator-token-0123456789"})
    assert code == 0, out


def test_run_refuses_the_same_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``kith run`` loads its config through ``load_or_exit`` first; asked here directly, so a
    regression fails this test instead of starting a daemon that never returns."""
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "data"), "server": {"port": 0},
                                "channels": {"telegram": {**TELEGRAM, "webhook_url": "https://bot.example.org/h"}}}))
    args = build_parser().parse_args(["-c", str(path), "run"])
    assert args.func is run_command
    with pytest.raises(SystemExit) as exited:
        load_or_exit(args)
    assert exited.value.code == 2 and "public webhook" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()  # refused before anything was created


@pytest.mark.parametrize("origin", ["*", "chat.example.org", "https://chat.example.org/app", "null",
                                    "ftp://chat.example.org", "https://user@chat.example.org"])
def test_allowed_origins_must_be_origins(tmp_path: Path, capsys: pytest.CaptureFixture[str], origin: str) -> None:
    code, out = _check(tmp_path, capsys, server={"allowed_origins": [origin]})
    assert code == 2 and "server.allowed_origins" in out
