"""Acceptance 7: malformed frames, oversized frames, unauthenticated non-loopback connections."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.cli.main import main as kith
from tests.conftest import make_config


async def test_malformed_frames_get_errors_and_connection_stays_usable(make_gateway: Any, ws_connect: Any) -> None:
    gw = await make_gateway()
    client = await ws_connect(gw)
    await client.hello("c1")
    for bad, code in [
        ("{not json", "bad_json"),
        ("[1, 2]", "bad_frame"),
        (json.dumps({"no": "type"}), "bad_frame"),
        (json.dumps({"type": "warp"}), "unknown_type"),
        (json.dumps({"type": "message", "text": 42}), "bad_frame"),
        (json.dumps({"type": "message", "text": "   "}), "bad_frame"),
        (json.dumps({"type": "message", "text": "x", "id": {"a": 1}}), "bad_frame"),
        (json.dumps({"type": "hello", "client_id": "../../etc"}), "bad_frame"),
    ]:
        await client.ws.send_str(bad)
        frame = await client.recv()
        assert frame["type"] == "error" and frame["code"] == code, (bad, frame)
    await client.ws.send_bytes(b"\x00\x01")
    assert (await client.recv())["code"] == "bad_frame"
    reply, _ = await client.ask("still works?")
    assert reply["type"] == "reply" and "still works?" in reply["text"]


async def test_oversized_frame_closes_with_1009(make_gateway: Any, ws_connect: Any) -> None:
    # Above max_frame_bytes a frame is answered too_large (tests/security/test_ws_frames.py); only one
    # above the hard limit (16 x max_frame_bytes) closes the connection.
    gw = await make_gateway(server={"max_frame_bytes": 4096})
    client = await ws_connect(gw)
    await client.hello("c1")
    await client.ws.send_str(json.dumps({"type": "message", "text": "x" * 70_000}))
    msg = await client.ws.receive(timeout=5)
    if msg.type == aiohttp.WSMsgType.CLOSE:
        assert msg.data == 1009
    else:
        assert msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING)
    assert client.ws.close_code == 1009


async def test_rate_limit_per_connection(make_gateway: Any, ws_connect: Any) -> None:
    gw = await make_gateway(server={"rate_limit": {"messages_per_minute": 1, "burst": 2}})
    client = await ws_connect(gw)
    await client.hello("c1")
    codes = []
    for _ in range(4):
        frame, _ = await client.ask("hi")
        codes.append(frame.get("code", frame["type"]))
    assert codes == ["reply", "reply", "rate_limited", "rate_limited"]


async def test_non_loopback_requires_token(tmp_path: Path, make_gateway: Any, ws_connect: Any) -> None:
    gw = await make_gateway(server={"host": "0.0.0.0", "token": "s3cret-token"})
    # No auth at all: a message frame is refused and the connection closed.
    client = await ws_connect(gw)
    await client.ws.send_json({"type": "hello", "client_id": "x"})
    frame = await client.recv()
    assert frame["type"] == "error" and frame["code"] == "unauthorized"
    await client.ws.receive(timeout=5)
    assert client.ws.close_code == 4401
    # Wrong token in the auth frame.
    client = await ws_connect(gw)
    await client.ws.send_json({"type": "auth", "token": "nope", "client_id": "x"})
    assert (await client.recv())["code"] == "unauthorized"
    # Wrong bearer header: the upgrade itself is refused.
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await ws_connect(gw, headers={"Authorization": "Bearer nope"})
    assert info.value.status == 401
    # The right token works both ways.
    client = await ws_connect(gw, headers={"Authorization": "Bearer s3cret-token"})
    assert (await client.hello("x"))["type"] == "ready"
    client = await ws_connect(gw)
    await client.ws.send_json({"type": "auth", "token": "s3cret-token", "client_id": "y"})
    assert (await client.recv())["type"] == "ready"


async def test_foreign_origin_is_refused_before_upgrade(make_gateway: Any, ws_connect: Any) -> None:
    gw = await make_gateway()
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await ws_connect(gw, headers={"Origin": "https://evil.example"})
    assert info.value.status == 403
    client = await ws_connect(gw, headers={"Origin": f"http://127.0.0.1:{gw.port}"})
    assert (await client.hello("z"))["type"] == "ready"


def test_non_loopback_without_token_is_a_config_error(tmp_path: Path) -> None:
    from gateway.config import ConfigError

    with pytest.raises(ConfigError) as info:
        make_config(tmp_path, server={"host": "0.0.0.0"})
    assert "server.token" in str(info.value)


def test_check_config_lists_every_mistake(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "server:\n  port: 99999\n  colour: blue\n"
        "llm:\n  provider: gpt\n  max_tokens: -1\n"
        "timezone: Mars/Olympus\n"
        "identity_links:\n  - user: Bob!\n    accounts: [nochannel]\n"
        "telemetry: true\n"
    )
    assert kith(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    for expected in ["server.port", "server.colour: unknown key", "llm.provider", "llm.max_tokens",
                     "timezone", "identity_links[0].user", "identity_links[0].accounts", "telemetry: unknown key"]:
        assert expected in err, (expected, err)
    good = tmp_path / "good.yaml"
    good.write_text("llm:\n  provider: echo\n")
    assert kith(["check-config", str(good)]) == 0


def test_env_secrets_and_overrides(tmp_path: Path) -> None:
    from gateway.config import ConfigError
    from gateway.configread import parse_config

    cfg = parse_config({"server": {"token": "${KITH_TOKEN}"}, "llm": {"api_key": {"$env": "MY_KEY"}}},
                       env={"KITH_TOKEN": "tok-123456", "MY_KEY": "k-abcdef", "KITH__SERVER__PORT": "9000"})
    assert cfg.server.token is not None and cfg.server.token.get_secret_value() == "tok-123456"
    assert cfg.server.port == 9000
    assert "tok-123456" not in repr(cfg)
    with pytest.raises(ConfigError) as info:
        parse_config({"server": {"token": "${MISSING_A}"}, "llm": {"api_key": {"$env": "MISSING_B"}}}, env={})
    assert "MISSING_A" in str(info.value) and "MISSING_B" in str(info.value)


def test_check_config_runs_plugin_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plugin's own section and its registrations are checked by check-config, not first by `kith run`."""
    bad_section = tmp_path / "section.yaml"
    bad_section.write_text("plugins:\n  modules: [tests.core.dup_tool_plugin]\nextensions:\n  dup_tool:\n"
                           "    mode: sideways\n")
    assert kith(["check-config", str(bad_section)]) == 2
    assert "extensions.dup_tool.mode: unknown mode 'sideways'" in capsys.readouterr().err
    duplicate = tmp_path / "duplicate.yaml"
    duplicate.write_text("plugins:\n  modules: [tests.core.dup_tool_plugin]\n")
    assert kith(["check-config", str(duplicate)]) == 2
    err = capsys.readouterr().err
    assert "tool 'memory_search' registered twice" in err and "tests.core.dup_tool_plugin" in err
