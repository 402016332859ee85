"""``kith service install [--user|--system] [--dry-run]``: systemd units for this install
(gateway/ops/service.py, docs/deployment.md). Writes unit files only: enabling and starting them is
one ``systemctl`` command, printed at the end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.cli.common import config_path, load_or_exit


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("service", help="systemd unit files for this install")
    ssub = parser.add_subparsers(dest="service_command", metavar="ACTION")
    p = ssub.add_parser("install", help="write kith.service and kith-worker@.service for this install")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--user", dest="scope", action="store_const", const="user",
                       help="a user unit in ~/.config/systemd/user (default)")
    scope.add_argument("--system", dest="scope", action="store_const", const="system",
                       help="a system unit in /etc/systemd/system, running as this account (copying needs root)")
    p.add_argument("--dry-run", action="store_true", help="print the files and where they would go; write nothing")
    p.add_argument("--unit-dir", default=None, help="write the units here instead (packaging, tests)")
    p.add_argument("--run-as", default=None, help="--system: the account kith runs as (default: this one; never root)")
    p.add_argument("--force", action="store_true", help="replace existing unit files that differ")
    p.set_defaults(func=run, scope="user")
    parser.set_defaults(func=lambda a: (parser.print_help(), 2)[1])


def run(args: argparse.Namespace) -> int:
    from gateway.ops.service import env_file, install, render

    config = load_or_exit(args)
    path = config_path(args)
    if path is None:
        print("note: no config file (-c or ./config.yaml): the unit runs kith with the defaults in "
              f"{Path.cwd()}", file=sys.stderr)
    try:
        units = render(config, config_file=Path(path) if path else None, scope=args.scope, workdir=Path.cwd(),
                       unit_directory=Path(args.unit_dir) if args.unit_dir else None, run_as=args.run_as)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        for u in units:
            print(f"# {u.path}")
            print(u.text)
        return 0
    data_dir = Path(config.data_dir).resolve()
    try:
        written = install(units, force=args.force)
        # The system unit sees the file system read-only except the data dir, which must exist then.
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileExistsError, PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, PermissionError):
            print("hint: --dry-run prints the files; or write them with --unit-dir and copy them as root",
                  file=sys.stderr)
        return 1
    for p in written:
        print(f"wrote {p}")
    print(f"data dir: {data_dir}")
    ctl = "systemctl --user" if args.scope == "user" else "sudo systemctl"
    print(f"secrets (ANTHROPIC_API_KEY=..., KITH_TOKEN=...) go in {env_file(args.scope)} (chmod 600)")
    print(f"then: {ctl} daemon-reload && {ctl} enable --now kith")
    if args.scope == "user":
        print("to keep it running after you log out: loginctl enable-linger $USER")
    return 0
