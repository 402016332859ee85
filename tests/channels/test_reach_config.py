"""Issue 30's acceptance for the config side: kith's Matrix, Slack, Signal and WhatsApp channels come from its own
``kith`` and ``kith.config`` entry points (as a third party's would), ``kith plugins`` lists them,
and ``kith check-config`` reports both sections' problems with the host's, all at once."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

from adapters.matrix_config import MatrixConfig, mxc_download_path
from adapters.slack_config import SlackConfig
from gateway.cli.main import main
from gateway.configread import parse_config


def _check_config(tmp_path: Path, capsys: pytest.CaptureFixture[str], **sections: Any) -> tuple[int, list[str]]:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"}, **sections}))
    code = main(["check-config", str(path)])
    captured = capsys.readouterr()
    return code, [line.strip().removeprefix("- ") for line in (captured.err + captured.out).splitlines()]


def test_the_channels_are_entry_points_of_kith_itself() -> None:
    for group in ("kith", "kith.config"):
        eps = importlib.metadata.entry_points(group=group)
        found = {ep.name: (ep.value, ep.dist.name if ep.dist else "") for ep in eps}
        assert found["matrix"] == ("adapters.matrix_config", "kith")
        assert found["slack"] == ("adapters.slack_config", "kith")
        assert found["signal"] == ("adapters.signal_config", "kith")
        assert found["whatsapp"] == ("adapters.whatsapp_config", "kith")


def test_kith_plugins_lists_them(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"}}))
    assert main(["-c", str(path), "plugins"]) == 0
    out = capsys.readouterr().out.splitlines()
    for name in ("matrix", "slack", "signal", "whatsapp"):
        (i,) = [i for i, line in enumerate(out) if line.split()[:1] == [name]]
        assert out[i].split()[1:] == ["entry-point", "kith"]
        hooks = [line.strip() for line in out[i + 1 : i + 3]]
        assert hooks == ["gateway_register_adapters", "gateway_register_channels"]


def test_check_config_reports_both_channels_and_the_host_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check_config(tmp_path, capsys, server={"port": -1}, channels={
        "matrix": {"enabled": True, "homeserver": "ftp://matrix.example.org", "colour": "red", "edits": "maybe"},
        "slack": {"enabled": True, "mode": "webhook", "slash_command": "kith", "timestamp_window_s": 3600},
    })
    assert code == 2
    assert {
        "server.port: Input should be greater than or equal to 0",
        "channels.matrix.homeserver: Value error, must be an http:// or https:// URL",
        "channels.matrix.colour: unknown key",
        "channels.matrix.edits: Input should be 'answer' or 'ignore'",
        "channels.slack.mode: Input should be 'socket' or 'events'",
        "channels.slack.slash_command: Value error, must start with '/'",
        "channels.slack.timestamp_window_s: Input should be less than or equal to 300",
    } <= set(out), out


def test_check_config_reports_what_each_channel_needs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check_config(tmp_path, capsys, channels={"matrix": {"enabled": True},
                                                          "slack": {"enabled": True, "mode": "events"}})
    assert code == 2
    assert {
        "channels.matrix.homeserver: required when the Matrix channel is enabled",
        "channels.matrix.access_token: required when the Matrix channel is enabled",
        "channels.slack.bot_token: required when the Slack channel is enabled",
        "channels.slack.signing_secret: the Events API refuses to start without the signing secret",
        # The real Slack calls a public URL: kith is on the internet then (docs/security.md#proxies).
        "server.token: required when Slack calls a public URL; set it with ${KITH_TOKEN} (docs/security.md#proxies)",
    } <= set(out), out
    socket = {"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1"}
    code, out = _check_config(tmp_path, capsys, channels={"slack": socket, "matrix": {
        "enabled": True, "homeserver": "https://matrix.example.org/", "access_token": "syt_x"}})
    assert code == 0, out


def test_the_sections_typed_and_their_http_needs() -> None:
    cfg = parse_config({"channels": {
        "matrix": {"enabled": True, "homeserver": "https://m.example.org/", "access_token": "t"},
        "slack": {"enabled": True, "mode": "events", "bot_token": "b", "signing_secret": "s",
                  "webhook_url": "https://kith.example.org/slack/events"}},
        "server": {"token": "x" * 32}}, env={})  # fmt: skip
    matrix = cfg.channels.section("matrix", MatrixConfig)
    slack = cfg.channels.section("slack", SlackConfig)
    assert matrix.homeserver == "https://m.example.org" and matrix.webhook_paths() == []  # sync: no webhook
    assert slack.webhook_paths() == ["/slack/events"] and slack.public_urls() == ["https://kith.example.org/slack/events"]
    assert slack.api_base == "https://slack.com/api/"


def test_mxc_uris_map_to_authenticated_media_only() -> None:
    assert mxc_download_path("mxc://example.org/AbC") == "/_matrix/client/v1/media/download/example.org/AbC"
    for bad in ("https://example.org/x", "mxc://example.org/", "mxc:///x", "mxc://example.org/a/b", "mxc://h/%2e%2e"):
        if bad.endswith("%2e%2e"):
            assert mxc_download_path(bad).endswith("/h/%252e%252e")  # quoted, never a path step
            continue
        with pytest.raises(ValueError):
            mxc_download_path(bad)


def test_signal_needs_its_number_and_a_daemon_on_this_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check_config(tmp_path, capsys, channels={"signal": {"enabled": True,
                                                                     "daemon_url": "http://10.0.0.5:8080"}})
    assert code == 2
    assert {"channels.signal.account: required when the Signal channel is enabled (the bot's number)",
            "channels.signal.daemon_url: signal-cli's HTTP interface has no authentication; keep it on this "
            "machine (127.0.0.1) or behind an authenticating HTTPS proxy"} <= set(out), out
    code, out = _check_config(tmp_path, capsys, channels={"signal": {"enabled": True, "account": "0151 234"}})
    assert code == 2 and any(line.startswith("channels.signal.account: Value error, must be a phone number")
                             for line in out), out
    code, out = _check_config(tmp_path, capsys, channels={"signal": {"enabled": True, "account": "+4915112345678"}})
    assert code == 0, out


def test_whatsapp_needs_its_secrets_and_a_token_for_kith(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check_config(tmp_path, capsys, channels={"whatsapp": {"enabled": True}})
    assert code == 2
    assert {f"channels.whatsapp.{key}: required when the WhatsApp channel is enabled"
            for key in ("access_token", "phone_number_id", "app_secret", "verify_token")} <= set(out), out
    # Meta calls a public HTTPS URL: kith is on the internet then.
    assert any(line.startswith("server.token: required when WhatsApp calls a public URL") for line in out), out
