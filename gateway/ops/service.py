"""systemd unit files for the current install (``kith service install``; docs/deployment.md).

The units start this very install: ExecStart is the ``kith`` of the running interpreter's virtual
environment with the config file's absolute path, so an upgrade of that venv is picked up by a
restart. Two units: ``kith.service`` (the daemon) and ``kith-worker@.service`` (extra job workers,
``systemctl enable --now kith-worker@1``). Secrets stay out of the unit: API keys and tokens come from
an ``EnvironmentFile`` (optional, mode 0600) or the config's ``${ENV}`` references.

Hardening: a system unit runs as the installing account (never root), with a read-only view of the
system and home directories except the data directory, no new privileges, no capabilities, private
devices and a 0077 umask. ``PrivateTmp`` is left off on purpose: the embedded Redis socket moves
under /tmp when the data dir's path is too long for a unix socket, and ``kith jobs`` from a shell
must reach it. A user unit gets the options an unprivileged systemd applies without user namespaces.
"""

from __future__ import annotations

import grp
import os
import pwd
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gateway.config import Config

Scope = Literal["user", "system"]
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
SYSTEM_ENV_FILE = Path("/etc/kith/kith.env")

# Options every unit gets, and those only a system manager can apply.
COMMON_HARDENING = (
    "NoNewPrivileges=yes",
    "UMask=0077",
    "LockPersonality=yes",
    "RestrictRealtime=yes",
    "RestrictSUIDSGID=yes",
    "SystemCallArchitectures=native",
)
SYSTEM_HARDENING = (
    "ProtectSystem=strict",
    "ProtectHome=read-only",
    "PrivateDevices=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "RestrictNamespaces=yes",
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
)


@dataclass(frozen=True, slots=True)
class Unit:
    path: Path
    text: str


def kith_command() -> list[str]:
    """How to start this install's kith: the venv's console script beside the interpreter, else the
    interpreter running the CLI module (an install without the script)."""
    script = Path(sys.executable).parent / "kith"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "gateway.cli.main"]


def unit_dir(scope: Scope) -> Path:
    if scope == "system":
        return SYSTEM_UNIT_DIR
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "systemd" / "user"


def env_file(scope: Scope) -> Path:
    if scope == "system":
        return SYSTEM_ENV_FILE
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "kith" / "kith.env"


def _quote(arg: str) -> str:
    """One ExecStart argument, quoted for systemd when it holds spaces or quotes ("%" doubled)."""
    arg = arg.replace("%", "%%")
    if not arg or any(c in arg for c in " \t\"'\\"):
        return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return arg


def docs_link() -> str | None:
    """The deployment guide of this install (a source checkout has it), for ``Documentation=``."""
    guide = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
    return f"file://{guide}" if guide.is_file() else None


def render(config: Config, *, config_file: Path | None, scope: Scope, workdir: Path,
           unit_directory: Path | None = None, run_as: str | None = None) -> list[Unit]:  # fmt: skip
    """The unit files for this install (nothing is written here). ``run_as``: the account a system
    unit runs as (default: the one running this; never root)."""
    base = kith_command() + (["-c", str(config_file.resolve())] if config_file else [])
    data_dir = (workdir / config.data_dir).resolve()
    stop_s = int(config.bus.shutdown_grace_s) + 30  # running jobs drain first, then the rest closes
    service: list[str] = [
        f"WorkingDirectory={workdir}",
        f"EnvironmentFile=-{env_file(scope)}",
        "Environment=PYTHONUNBUFFERED=1",
        "Restart=on-failure",
        "RestartSec=5s",
        # Exit 2 is a configuration problem (an invalid config, the port taken, the data dir held by
        # another daemon): restarting every 5 s would only repeat the same line in the journal.
        "RestartPreventExitStatus=2",
        f"TimeoutStopSec={stop_s}",
        "KillSignal=SIGTERM",
        "LimitNOFILE=65536",
        *COMMON_HARDENING,
    ]
    if scope == "system":
        try:
            account = pwd.getpwnam(run_as) if run_as else pwd.getpwuid(os.getuid())
        except KeyError:
            raise ValueError(f"no account {run_as!r} on this machine") from None
        if account.pw_uid == 0:
            raise ValueError("refusing to write a system unit that runs kith as root: run this as the account "
                             "kith should run as, or name it with --run-as (root is needed only to copy files)")
        try:
            group = grp.getgrgid(account.pw_gid).gr_name
        except KeyError:
            group = str(account.pw_gid)
        service = [f"User={account.pw_name}", f"Group={group}", *service, *SYSTEM_HARDENING,
                   f"ReadWritePaths={data_dir}"]
    wanted = "multi-user.target" if scope == "system" else "default.target"
    directory = unit_directory or unit_dir(scope)
    docs = docs_link()

    def unit(description: str, command: list[str], extra_unit: tuple[str, ...] = ()) -> str:
        lines = [
            "# Written by `kith service install`; docs/deployment.md. Re-run it after moving the install.",
            "[Unit]",
            f"Description={description}",
            *([f"Documentation={docs}"] if docs else []),
            "After=network-online.target",
            "Wants=network-online.target",
            *extra_unit,
            "",
            "[Service]",
            "Type=simple",
            "ExecStart=" + " ".join(_quote(a) for a in command),
            *service,
            "",
            "[Install]",
            f"WantedBy={wanted}",
            "",
        ]
        return "\n".join(lines)

    return [
        Unit(directory / "kith.service", unit("kith personal-assistant gateway", [*base, "run"])),
        Unit(directory / "kith-worker@.service",
             unit("kith job worker %i", [*base, "worker"], ("After=kith.service", "PartOf=kith.service"))),
    ]


def install(units: list[Unit], *, force: bool = False) -> list[Path]:
    """Write ``units`` (0644, atomically); an existing different file is refused unless ``force``."""
    written = []
    for u in units:
        if u.path.exists() and u.path.read_text() != u.text and not force:
            raise FileExistsError(f"{u.path} exists and differs (use --force to replace it)")
        u.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = u.path.with_name(f".{u.path.name}.tmp")
        tmp.write_text(u.text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, u.path)
        written.append(u.path)
    return written
