"""``kith users login-link USER [--operator]`` end to end: the command line asks the daemon started
here (its operator token from the data dir), prints a link, and that link signs a browser in."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from gateway.cli.main import main
from gateway.testing import test_config
from tests.signin.rig import browser, daemon, open_link, person, url


def cli_config(tmp_path: Path, port: int) -> Path:
    """The config file the operator's shell uses: the daemon's data dir and port."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"), "server": {"port": port},
                                    "llm": {"provider": "echo"}}))  # fmt: skip
    return path


async def kith(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


async def test_login_link_against_a_running_daemon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        cfg = cli_config(tmp_path, gw.port or 0)
        assert await kith("-c", str(cfg), "users", "login-link", alice) == 0
        out = capsys.readouterr().out
        link = out.strip().splitlines()[-1]
        assert link.startswith(f"http://127.0.0.1:{gw.port}/signin?t=") and alice in out
        assert "operator" not in out
        async with browser() as http:
            assert (await open_link(http, link)).status == 303
            async with http.get(url(gw, "/t/whoami")) as resp:
                assert await resp.json() == {"user_id": alice, "operator": False, "via": "cookie"}

        assert await kith("-c", str(cfg), "users", "login-link", alice, "--operator", "--json") == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["operator"] is True and answer["user"] == alice
        async with browser() as http:
            assert (await open_link(http, answer["url"])).status == 303
            async with http.get(url(gw, "/t/whoami")) as resp:
                assert (await resp.json())["operator"] is True

        # USER as every `kith users` action reads it: a display name only one person has, channel:account.
        for name in ("Alice", "websocket:alice"):
            assert await kith("-c", str(cfg), "users", "login-link", name, "--json") == 0
            assert json.loads(capsys.readouterr().out)["user"] == alice

        assert await kith("-c", str(cfg), "users", "login-link", "u-nobody") == 2
        assert "no user 'u-nobody'" in capsys.readouterr().err


async def test_login_link_without_a_daemon_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        port, alice = gw.port or 0, await person(gw, "alice")
    # The daemon is gone; its token file and state remain, nobody listens on the port.
    assert await kith("-c", str(cli_config(tmp_path, port)), "users", "login-link", alice) == 3
    assert "no kith daemon answers" in capsys.readouterr().err
