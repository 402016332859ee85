"""``channels.email``: a channel of this package's entry points (as a third party's), its section checked
with kith's own and every problem at once (``kith check-config``), and listed by ``kith plugins``."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest
from kith_channel_email.config import EmailConfig

from gateway.cli.main import main
from gateway.configread import parse_config


def _check_config(tmp_path: Path, capsys: pytest.CaptureFixture[str], **sections: Any) -> tuple[int, list[str]]:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"}, **sections}))
    code = main(["check-config", str(path)])
    captured = capsys.readouterr()
    return code, [line.strip().removeprefix("- ") for line in (captured.err + captured.out).splitlines()]


def test_email_is_an_entry_point_of_its_package_and_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for group in ("kith", "kith.config"):
        found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=group)}
        assert found["email"] == "kith_channel_email.config"
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"}}))
    assert main(["-c", str(path), "plugins"]) == 0
    out = capsys.readouterr().out.splitlines()
    (i,) = [i for i, line in enumerate(out) if line.split()[:1] == ["email"]]
    assert out[i].split()[1:] == ["entry-point", "kith-channel-email"]


def test_check_config_reports_every_email_problem_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check_config(tmp_path, capsys, server={"port": -1}, channels={"email": {
        "enabled": True, "address": "kith", "imap_host": "imap.example.org", "imap_security": "plain",
        "smtp_port": 0, "colour": "red", "group_allow": ["*"]}})  # fmt: skip
    assert code == 2
    assert {
        "server.port: Input should be greater than or equal to 0",
        "channels.email.colour: unknown key",
        "channels.email.smtp_port: Input should be greater than or equal to 1",
    } <= set(out), out
    code, out = _check_config(tmp_path, capsys, channels={"email": {
        "enabled": True, "address": "kith", "imap_host": "imap.example.org", "imap_security": "plain",
        "group_allow": ["*"], "ca_file": "/nowhere/ca.pem"}})  # fmt: skip
    assert code == 2
    assert {
        "channels.email.address: the bot's email address is required when the email channel is enabled",
        "channels.email.smtp_host: required when the email channel is enabled",
        "channels.email.imap_password: required when the email channel is enabled",
        "channels.email.imap_security: plain (unencrypted) is allowed only for a server on this machine, not "
        "'imap.example.org'; use ssl or starttls",
        "channels.email.ca_file: no such file: /nowhere/ca.pem",
        "channels.email.group_allow: email has no groups; every mail is a one-to-one conversation",
    } <= set(out), out
    assert any(line.startswith("channels.email.authserv_id: the authserv-id your mail server writes") for line in out)
    code, out = _check_config(tmp_path, capsys, channels={"email": {"idle_renew_s": 600, "stall_after_s": 300}})
    assert code == 0, out  # a disabled section is not checked
    code, out = _check_config(tmp_path, capsys, channels={"email": {"enabled": True, "idle_renew_s": 600,
                                                                     "stall_after_s": 300}})  # fmt: skip
    assert any(line.startswith("channels.email.stall_after_s: must be longer than idle_renew_s") for line in out)
    good = {"enabled": True, "address": "kith@example.org", "imap_host": "imap.example.org", "imap_password": "p",
            "smtp_host": "smtp.example.org", "smtp_security": "starttls", "smtp_port": 587,
            "authserv_id": "mx.example.org"}  # fmt: skip
    code, out = _check_config(tmp_path, capsys, channels={"email": good})
    assert code == 0, out


def test_smtp_credentials_default_to_the_imap_ones() -> None:
    def section(**extra: Any) -> EmailConfig:
        cfg = parse_config({"channels": {"email": {"address": "kith@example.org", "imap_password": "p", **extra}}},
                           env={})  # fmt: skip
        return cfg.channels.section("email", EmailConfig)

    assert section().smtp_login() == ("kith@example.org", "p")
    assert section(imap_user="kith", smtp_user="out", smtp_password="q").smtp_login() == ("out", "q")
    assert section(smtp_password="").smtp_login() is None
