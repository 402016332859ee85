"""``kith context``: the exact prompt for a message, section by section, from the daemon or locally."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from gateway.app import Gateway
from gateway.cli.main import main
from gateway.configread import parse_config
from tests.memory_stages.conftest import msg
from tests.storage import select_one

PROFILE = "# Ada\n\n## Basics\n- Ada lives in Marseille and rows on Sundays.\n"


def config_data(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"}, "server": {"port": 0},
            "plugins": {"entry_points": False},
            "identity_links": [{"user": "ada", "accounts": ["websocket:ada"]}], **extra}


async def seed(data: dict[str, Any]) -> None:
    async with Gateway(parse_config(data, env={}), entry_points=False) as gw:
        gw.memory_store("ada").write("USER.md", PROFILE, source="test")
        await gw.handle_inbound(msg("I bought a new oar made of carbon fibre."))
        await gw.handle_inbound(msg("/new"))  # so the oar can only come from recall
        await gw.settle()


def test_local_context_shows_every_section_with_tokens_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = config_data(tmp_path)
    asyncio.run(seed(data))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    turns_before = (tmp_path / "data" / "users" / "ada" / "sessions").stat().st_mtime_ns

    assert main(["-c", str(path), "context", "--local", "--user", "ada", "--json", "what oar do I have?"]) == 0
    x = json.loads(capsys.readouterr().out)
    by_source = {s["source"]: s for s in x["sections"]}
    assert "Marseille" in by_source["memory.profile"]["text"] and by_source["memory.profile"]["cached"]
    assert "carbon fibre" in by_source["memory.recall"]["text"] and not by_source["memory.recall"]["cached"]
    assert all(s["tokens"] > 0 for s in x["sections"])
    assert x["system_tokens"] == sum(s["tokens"] for s in x["sections"])
    assert x["messages"][-1]["content"] == "what oar do I have?"
    assert (tmp_path / "data" / "users" / "ada" / "sessions").stat().st_mtime_ns == turns_before

    assert main(["-c", str(path), "context", "--local", "--user", "ada", "--tier", "1", "hello"]) == 0
    text = capsys.readouterr().out
    assert "tier 1" in text and "Marseille" not in text and "=== Identity" in text

    assert main(["-c", str(path), "context", "--local", "--user", "nobody", "hello"]) == 2
    assert "unknown user" in capsys.readouterr().err


async def test_daemon_serves_context_to_operators_only(tmp_path: Path) -> None:
    data = config_data(tmp_path, server={"port": 0, "token": "operator-secret-123"})
    async with Gateway(parse_config(data, env={}), entry_points=False) as gw:
        gw.memory_store("ada").write("USER.md", PROFILE, source="test")
        await gw.handle_inbound(msg("hello"))
        url = f"http://127.0.0.1:{gw.port}/api/users/ada/context"
        body = {"channel": "websocket", "message": "where do I live?"}
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=body) as resp:
                assert resp.status == 401
            async with http.post(url, json=body, headers={"Authorization": "Bearer wrong"}) as resp:
                assert resp.status == 401
            auth = {"Authorization": "Bearer operator-secret-123"}
            async with http.post(url, json=body, headers=auth) as resp:
                assert resp.status == 200
                x = await resp.json()
            async with http.post(url, data=b"not json", headers={**auth, "Content-Type": "application/json"}) as resp:
                assert resp.status == 400
        assert any("Marseille" in s["text"] for s in x["sections"])
        assert x["session"]["new"] is False  # the live session is peeked, not replaced
        assert select_one(gw.state, "SELECT COUNT(*) AS n FROM sessions")["n"] == 1


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_memory_and_context_commands_ask_the_running_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daemon holds the embedded index: the CLI asks it over the operator API instead of failing."""
    import threading

    data = config_data(tmp_path, server={"port": _free_port()})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    ready, stop = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    async def daemon() -> None:
        async with Gateway(parse_config(data, env={}), entry_points=False) as gw:
            gw.memory_store("ada").write("USER.md", PROFILE, source="test")
            await gw.handle_inbound(msg("I bought a new oar made of carbon fibre."))
            await gw.handle_inbound(msg("/new"))
            await gw.settle()
            ready.set()
            await asyncio.to_thread(stop.wait)

    def run() -> None:
        try:
            asyncio.run(daemon())
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert ready.wait(60) and not errors, errors
        assert main(["-c", str(path), "memory", "search", "--user", "ada", "--json", "which", "oar"]) == 0
        hits = json.loads(capsys.readouterr().out)
        assert any("carbon fibre" in h["text"] for h in hits)
        assert main(["-c", str(path), "memory", "stats", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["scopes"]["user:ada"]["points"] > 0
        assert main(["-c", str(path), "context", "--user", "ada", "--json", "which oar?"]) == 0
        x = json.loads(capsys.readouterr().out)
        assert any("carbon fibre" in s["text"] for s in x["sections"])
        # A user nobody knows reads as without a daemon: context refuses, search finds nothing.
        assert main(["-c", str(path), "context", "--user", "nobody", "hello"]) == 2
        assert "unknown user 'nobody'" in capsys.readouterr().err
        assert main(["-c", str(path), "memory", "search", "--user", "nobody", "oar"]) == 0
        assert "no memories found" in capsys.readouterr().out
        assert main(["-c", str(path), "sessions", "search", "--user", "ada", "--json", "oar"]) == 0
        assert any("carbon fibre" in e["text"] for e in json.loads(capsys.readouterr().out))
        assert main(["-c", str(path), "sessions", "search", "--user", "ada", "--exact", "--json", "carbon"]) == 0
        assert any("carbon fibre" in e["text"] for e in json.loads(capsys.readouterr().out))
        # A rebuild runs on the daemon, in place: recall keeps answering while it runs.
        assert main(["-c", str(path), "memory", "reindex", "--user", "ada"]) == 0
        assert "queued a rebuild of 1 scopes" in capsys.readouterr().out
        for _ in range(5):
            assert main(["-c", str(path), "memory", "search", "--user", "ada", "--json", "which", "oar"]) == 0
            assert any("carbon fibre" in h["text"] for h in json.loads(capsys.readouterr().out))
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors
