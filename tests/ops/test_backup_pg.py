"""A PostgreSQL install: ``kith doctor`` sees the database, and its backup restores into a new data dir
on SQLite with the same rows (the manifest's checksums are backend-neutral: transfer.canonical)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gateway.testing import GatewayFactory, message
from tests.ops.cli import kith


async def test_postgres_install_doctor_backup_and_restore_to_sqlite(make_gateway: GatewayFactory, pg_url: str,
                                                                    tmp_path: Path) -> None:  # fmt: skip
    gw = await make_gateway(state={"url": pg_url})
    for text in ("I keep bees on the allotment", "the hives are painted yellow"):
        assert await gw.handle_inbound(message(text, account="bea"))
    await gw.settle()
    cfg = tmp_path / "kith.yaml"
    cfg.write_text(yaml.safe_dump({"data_dir": str(gw.data_dir), "llm": {"provider": "echo"},
                                   "server": {"port": gw.port}, "state": {"url": pg_url},
                                   "plugins": {"entry_points": False}}))
    code, out, err = await kith("-c", str(cfg), "doctor", "--json", "--timeout", "15")  # beside the daemon it checks
    state = {c["name"]: c for c in json.loads(out)["checks"]}["state"]
    assert state["status"] == "ok" and state["detail"].startswith("PostgreSQL"), (state, err)
    assert "@" not in state["detail"]  # the URL's credentials are never printed

    code, out, err = await kith("-c", str(cfg), "backup", str(tmp_path / "pg.tar"), "--json")
    assert code == 0, err
    assert json.loads(out)["rows"] > 0
    code, out, err = await kith("-c", str(cfg), "restore", str(tmp_path / "pg.tar"), "--data-dir",
                                str(tmp_path / "on-sqlite"), "--no-index", "--json")
    assert code == 0, err
    restored = json.loads(out)
    assert restored["tables"]["turns"] >= 2 and (tmp_path / "on-sqlite" / "state.sqlite").exists()
