"""``kith service install``: unit files for this install, checked by systemd's own verifier when present."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateway.cli.main import main


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"data_dir": "./kith-data", "llm": {"api_key": "sk-ant-secret-value-123"},
                                   "server": {"port": 18766}}))
    return cfg


def units(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, str]:
    assert main(["service", "install", "--dry-run", *args]) == 0
    files: dict[str, list[str]] = {}
    current: list[str] = []
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("# /"):  # the dry run's header: where the file would go
            current = files.setdefault(Path(line[2:]).name, [])
        else:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in files.items()}


def test_system_units_run_this_install_hardened(install: Path, capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:  # fmt: skip
    files = units(capsys, "--system", "--run-as", "nobody")
    assert set(files) == {"kith.service", "kith-worker@.service"}
    daemon = files["kith.service"]
    kith = Path(sys.executable).parent / "kith"
    assert f"ExecStart={kith} -c {install} run" in daemon
    assert f"ExecStart={kith} -c {install} worker" in files["kith-worker@.service"]
    for line in ("User=nobody", f"ReadWritePaths={tmp_path / 'kith-data'}", "ProtectSystem=strict",
                 "NoNewPrivileges=yes", "CapabilityBoundingSet=", "Restart=on-failure", "RestartPreventExitStatus=2",
                 "WantedBy=multi-user.target", "EnvironmentFile=-/etc/kith/kith.env", f"WorkingDirectory={tmp_path}"):
        assert line in daemon.splitlines(), line
    assert "sk-ant-secret-value-123" not in daemon  # secrets stay in the config or the environment file
    if shutil.which("systemd-analyze"):
        (tmp_path / "kith.service").write_text(daemon)
        done = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "kith.service")], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr


def test_user_units_and_refusals(install: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    daemon = units(capsys, "--user")["kith.service"]
    assert "WantedBy=default.target" in daemon and "User=" not in daemon and "ProtectSystem" not in daemon
    assert main(["service", "install", "--system", "--run-as", "root", "--dry-run"]) == 2  # never as root
    # --dry-run wrote nothing; install writes, keeps an identical file, refuses a different one without --force
    out_dir = tmp_path / "units"
    assert not out_dir.exists()
    assert main(["service", "install", "--unit-dir", str(out_dir)]) == 0
    assert (out_dir / "kith.service").read_text().strip() == daemon.strip()
    assert (tmp_path / "kith-data").is_dir()
    assert main(["service", "install", "--unit-dir", str(out_dir)]) == 0
    (out_dir / "kith.service").write_text("edited by hand\n")
    assert main(["service", "install", "--unit-dir", str(out_dir)]) == 1
    assert main(["service", "install", "--unit-dir", str(out_dir), "--force"]) == 0
    assert (out_dir / "kith.service").read_text().strip() == daemon.strip()
