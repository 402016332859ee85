"""Every scope's store is built in one place (gateway/memory/files/stores.py) and reports its writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.configread import parse_config
from gateway.memory.files.errors import FileTooLargeError
from gateway.memory.files.scopes import ScopeError
from gateway.memory.files.stores import Stores


def test_each_scope_has_one_store_and_every_write_reaches_every_subscriber(tmp_path: Path) -> None:
    stores = Stores(tmp_path, max_file_bytes=4096)
    first: list[tuple[str, str]] = []
    second: list[tuple[str, str]] = []

    def broken(scope: str, rel: str) -> None:
        raise RuntimeError("a subscriber that fails")

    stores.subscribe(lambda scope, rel: first.append((scope, rel)))
    stores.subscribe(broken)  # its failure is logged; the write and the other subscribers go on
    stores.subscribe(lambda scope, rel: second.append((scope, rel)))
    assert stores.for_user("ada") is stores.store_for("user:ada")
    stores.for_user("ada").write("notes.md", "- figs\n", source="test")
    stores.for_channel("telegram:-100123").write("USER.md", "# Room\n", source="test")
    stores.for_persona("kith").write("SOUL.md", "Warm.\n", source="test")
    expected = [("user:ada", "notes.md"), ("channel:telegram--100123", "USER.md"), ("persona:kith", "SOUL.md")]
    assert first == second == expected
    assert stores.known_scopes() == ["user:ada", "channel:telegram--100123", "persona:kith"]
    assert stores.root_for("user:ada") == tmp_path / "users" / "ada"
    with pytest.raises(ScopeError):
        stores.store_for("user:../bob")


def test_an_unwatched_store_has_the_limits_and_reports_to_no_subscriber(tmp_path: Path) -> None:
    config = parse_config({"data_dir": str(tmp_path), "memory": {"max_file_bytes": 2048}}, env={})
    stores = Stores.of(config)
    heard: list[tuple[str, str]] = []
    stores.subscribe(lambda scope, rel: heard.append((scope, rel)))
    own: list[str] = []
    store = stores.unwatched(tmp_path / "elsewhere", on_write=own.append)
    store.write("a.md", "x\n", source="test")
    with pytest.raises(FileTooLargeError):
        store.write("b.md", "x" * 4096, source="test")
    assert own == ["a.md"] and heard == []


def test_a_forgotten_scope_gets_a_fresh_store(tmp_path: Path) -> None:
    stores = Stores(tmp_path, max_file_bytes=4096)
    before = stores.for_user("ada")
    stores.forget("user:ada")
    assert stores.for_user("ada") is not before
