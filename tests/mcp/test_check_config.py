"""``kith check-config`` validates the mcp section: transports and their fields, server names, and a
stdio command that is not on PATH (found before ``kith run``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.main import main


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], servers: dict[str, Any]) -> tuple[int, str]:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "data"), "mcp": {"servers": servers}}))
    code = main(["check-config", str(path)])
    captured = capsys.readouterr()
    return code, captured.err + captured.out


def test_a_valid_mcp_section_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(tmp_path, capsys, {
        "files": {"command": sys.executable, "args": ["-m", "server"], "env": {"TOKEN": "t0ken-value"}},
        "web": {"transport": "http", "url": "https://mcp.example.org/mcp", "headers": {"Authorization": "Bearer x"}},
    })
    assert code == 0, out


@pytest.mark.parametrize("servers, problem", [
    ({"files": {"command": "no-such-mcp-server-binary"}}, "is not an executable on PATH"),
    ({"files": {"transport": "stdio"}}, "transport stdio needs 'command'"),
    ({"web": {"transport": "http"}}, "transport http needs 'url'"),
    ({"web": {"transport": "http", "url": "https://h/mcp", "command": "x"}}, "are for transport stdio"),
    ({"files": {"command": "python3", "url": "https://h/mcp"}}, "are for transport http"),
    ({"my__files": {"command": "python3"}}, "without '__'"),
    ({"Files": {"command": "python3"}}, "server names must be"),
    ({"files": {"command": "python3", "tier": 5}}, "tier"),
    ({"files": {"command": "python3", "timeout_s": 0}}, "timeout_s"),
    ({"files": {"command": "python3", "cwd": "/no/such/dir"}}, "is not a directory"),
    ({"files": {"command": "python3", "colour": "blue"}}, "colour"),
])
def test_bad_mcp_sections_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      servers: dict[str, Any], problem: str) -> None:
    code, out = check(tmp_path, capsys, servers)
    assert code == 2 and problem in out, out


def test_a_disabled_server_is_not_looked_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(tmp_path, capsys, {"files": {"command": "no-such-mcp-server-binary", "enabled": False}})
    assert code == 0, out
