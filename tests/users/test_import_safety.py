"""``kith users import`` checks the archive whole before writing: no traversal, no links, size caps,
a known format; a refused archive leaves nothing behind (no user, no row, no file, no staging folder)."""

from __future__ import annotations

import io
import json
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

import gateway.identity.import_ as import_mod
from gateway.identity.export import FORMAT, VERSION
from gateway.identity.import_ import ArchiveError, import_user
from gateway.state import State, open_configured

TOP = "kith-user-uold"


def _docs(**extra: bytes) -> dict[str, bytes]:
    rows = {"users": [{"user_id": "uold", "display_name": "Old", "timezone": "UTC",
                       "created_at": "2026-01-01 00:00:00.000000"}]}  # fmt: skip
    docs = {"manifest.json": json.dumps({"format": FORMAT, "version": VERSION, "user_id": "uold"}).encode(),
            "rows.json": json.dumps(rows).encode(), "memory/USER.md": b"# Old\n"}  # fmt: skip
    docs.update(extra)
    return docs


def _tar(path: Path, docs: dict[str, bytes], *, extra: list[tarfile.TarInfo] = ()) -> Path:  # type: ignore[assignment]
    with tarfile.open(path, "w:gz") as tar:
        for name, data in docs.items():
            info = tarfile.TarInfo(name if name.startswith("/") or name.startswith("..") else f"{TOP}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return path


@pytest.fixture
def state(tmp_path: Path, state_url: str | None) -> State:
    """SQLite and PostgreSQL (tests/pg.py)."""
    s = open_configured(tmp_path / "data", state_url)
    yield s  # type: ignore[misc]
    s.close()


def _nothing_written(state: State, data: Path) -> None:
    assert state.users.all() == []
    assert not (data / "users").exists() or list((data / "users").iterdir()) == []
    assert [p.name for p in data.iterdir() if p.name.startswith(".import-")] == []


def test_a_good_archive_imports(tmp_path: Path, state: State) -> None:
    data = tmp_path / "data"
    report = import_user(state, data, _tar(tmp_path / "a.tar.gz", _docs()), as_user="unew")
    assert report.user_id == "unew" and report.files == 1
    assert (data / "users" / "unew" / "USER.md").read_text() == "# Old\n"
    assert state.users.get("unew") is not None


@pytest.mark.parametrize("name", ["../evil.md", "/etc/evil.md", f"{TOP}/memory/../../evil.md",
                                  f"{TOP}/memory/a\\..\\b.md", "other-top/memory/x.md"])  # fmt: skip
def test_paths_outside_the_archive_are_refused(tmp_path: Path, state: State, name: str) -> None:
    data = tmp_path / "data"
    info = tarfile.TarInfo(name)
    info.size = 3
    archive = _tar(tmp_path / "a.tar.gz", _docs())
    with tarfile.open(archive, "w:gz") as tar:  # rewritten with the bad member among good ones
        for n, d in _docs().items():
            good = tarfile.TarInfo(f"{TOP}/{n}")
            good.size = len(d)
            tar.addfile(good, io.BytesIO(d))
        tar.addfile(info, io.BytesIO(b"bad"))
    with pytest.raises(ArchiveError):
        import_user(state, data, archive, as_user="unew")
    _nothing_written(state, data)
    assert not (tmp_path / "evil.md").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_links_and_devices_are_refused(tmp_path: Path, state: State, kind: bytes) -> None:
    data = tmp_path / "data"
    link = tarfile.TarInfo(f"{TOP}/memory/link.md")
    link.type = kind
    link.linkname = "/etc/passwd"
    archive = _tar(tmp_path / "a.tar.gz", _docs(), extra=[link])
    with pytest.raises(ArchiveError, match="not a regular file"):
        import_user(state, data, archive, as_user="unew")
    _nothing_written(state, data)


def test_a_symlink_in_a_zip_is_refused(tmp_path: Path, state: State) -> None:
    data = tmp_path / "data"
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, body in _docs().items():
            zf.writestr(f"{TOP}/{name}", body)
        info = zipfile.ZipInfo(f"{TOP}/memory/link.md")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(ArchiveError, match="symlink"):
        import_user(state, data, archive, as_user="unew")
    _nothing_written(state, data)


def test_size_caps_are_counted_while_reading(tmp_path: Path, state: State, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setattr(import_mod, "MAX_FILE_BYTES", 1000)
    archive = _tar(tmp_path / "a.tar.gz", _docs(**{"memory/big.md": b"x" * 5000}))
    with pytest.raises(ArchiveError, match="larger than"):
        import_user(state, data, archive, as_user="unew")
    _nothing_written(state, data)
    monkeypatch.setattr(import_mod, "MAX_FILE_BYTES", 10_000)
    monkeypatch.setattr(import_mod, "MAX_TOTAL_BYTES", 3000)
    with pytest.raises(ArchiveError, match="more than 3000 bytes"):
        import_user(state, data, archive, as_user="unew")
    _nothing_written(state, data)
    monkeypatch.setattr(import_mod, "MAX_TOTAL_BYTES", 10**9)
    monkeypatch.setattr(import_mod, "MAX_MEMBERS", 2)
    with pytest.raises(ArchiveError, match="more than 2 members"):
        import_user(state, data, archive, as_user="unew")
    _nothing_written(state, data)


@pytest.mark.parametrize("manifest", [b"{}", b"not json", json.dumps({"format": FORMAT, "version": 99}).encode()])
def test_unknown_formats_are_refused(tmp_path: Path, state: State, manifest: bytes) -> None:
    data = tmp_path / "data"
    with pytest.raises(ArchiveError):
        import_user(state, data, _tar(tmp_path / "a.tar.gz", _docs(**{"manifest.json": manifest})), as_user="unew")
    _nothing_written(state, data)


def test_not_an_archive(tmp_path: Path, state: State) -> None:
    data = tmp_path / "data"
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(ArchiveError):
        import_user(state, data, junk)
    _nothing_written(state, data)


def test_a_failing_row_write_removes_the_files(tmp_path: Path, state: State) -> None:
    """Rows that each fit their columns but not the database together (the same open fact twice: the
    unique index refuses the second)."""
    data = tmp_path / "data"
    at = "2026-01-01 00:00:00.000000"
    fact = {"user_id": "uold", "subject": "Old", "subject_key": "old", "predicate": "likes", "object": "tea",
            "object_key": "tea", "valid_from": at, "valid_until": None, "created_at": at}  # fmt: skip
    bad_rows = {"users": [{"user_id": "uold", "display_name": "Old", "timezone": "UTC", "created_at": at}],
                "kg_facts": [fact, dict(fact)]}  # fmt: skip
    archive = _tar(tmp_path / "a.tar.gz", _docs(**{"rows.json": json.dumps(bad_rows).encode()}))
    with pytest.raises(ArchiveError, match=r"(?i)unique|duplicate"):  # SQLite: UNIQUE; PostgreSQL: duplicate key
        import_user(state, data, archive, as_user="unew")
    _nothing_written(state, data)


def test_an_existing_user_is_not_overwritten(tmp_path: Path, state: State) -> None:
    data = tmp_path / "data"
    state.users.create("unew", display_name="Someone", timezone="UTC")
    with pytest.raises(ArchiveError, match="exists"):
        import_user(state, data, _tar(tmp_path / "a.tar.gz", _docs()), as_user="unew")
    assert state.users.get("unew").display_name == "Someone"  # type: ignore[union-attr]
    with pytest.raises(ArchiveError, match="invalid memory scope"):
        import_user(state, data, _tar(tmp_path / "b.tar.gz", _docs()), as_user="../up")
