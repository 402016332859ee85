"""``kith users list | show``, USER resolution, and the delete confirmation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gateway.cli.main import build_parser
from gateway.testing import message
from tests.users.support import config_of, kith, started, write_config


@pytest.fixture
def people(tmp_path: Path) -> tuple[Path, str, str, str]:
    cfg_path = write_config(tmp_path)
    config = config_of(cfg_path)

    async def talk() -> tuple[str, str, str]:
        gw = await started(config)
        try:
            await gw.handle_inbound(message("hi, I'm Alice", account="alice"))
            await gw.handle_inbound(message("hi, Sam one", account="sam1", name="Sam"))
            await gw.handle_inbound(message("hi, Sam two", account="sam2", name="Sam"))
            await gw.settle()
            ids = [gw.identities.lookup("websocket", a) for a in ("alice", "sam1", "sam2")]
            gw.state.users.set_timezone(ids[0], "Europe/Berlin")  # type: ignore[arg-type]
            return ids[0], ids[1], ids[2]  # type: ignore[return-value]
        finally:
            await gw.close()

    return cfg_path, *asyncio.run(talk())


def test_list_as_table_and_json(people: tuple[Path, str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    cfg, alice, sam1, sam2 = people
    assert kith(cfg, "users", "list") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["USER", "NAME", "ACCOUNTS", "PERSONA", "TIME", "ZONE", "ON", "DISK", "LAST", "SEEN"]
    line = next(row for row in out if row.startswith(alice))
    assert "Alice" in line and "websocket:alice" in line and "Europe/Berlin" in line and " B " in line + " "
    assert kith(cfg, "users", "list", "--json") == 0
    rows = {r["user_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {alice, sam1, sam2}
    a = rows[alice]
    assert a["accounts"] == ["websocket:alice"] and a["timezone"] == "Europe/Berlin"
    assert a["messages"] == 1 and a["sessions"] == 1 and a["bytes"] > 0 and a["files"] > 0
    assert a["last_seen"] and a["persona"]


def test_show_resolves_id_name_and_account(people: tuple[Path, str, str, str],
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    cfg, alice, sam1, _sam2 = people
    for user in (alice, "alice", "ALICE", "websocket:alice"):
        assert kith(cfg, "users", "show", user, "--json") == 0
        assert json.loads(capsys.readouterr().out)["user_id"] == alice
    assert kith(cfg, "users", "show", "websocket:sam1") == 0
    out = capsys.readouterr().out
    assert f"user       {sam1}" in out and "accounts   websocket:sam1" in out
    assert kith(cfg, "users", "show", "Sam") == 2
    assert "is the name of 2 people" in capsys.readouterr().err
    assert kith(cfg, "users", "show", "nobody") == 2
    assert "no user 'nobody'" in capsys.readouterr().err


def test_delete_asks_unless_yes(people: tuple[Path, str, str, str], capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    cfg, alice, _sam1, _sam2 = people
    # Not a terminal: refused without --yes, nothing erased.
    assert kith(cfg, "users", "delete", alice) == 2
    assert "--yes" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    assert kith(cfg, "users", "delete", alice) == 1
    assert kith(cfg, "users", "show", alice) == 0
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    assert kith(cfg, "users", "delete", alice, "--json") == 0
    capsys.readouterr()
    assert kith(cfg, "users", "show", alice) == 2


def test_users_help_lists_every_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["users", "--help"])
    out = capsys.readouterr().out
    for action in ("list", "show", "export", "delete", "import", "login-link"):
        assert action in out
