"""``kith`` command line: one module per command group, each registering its own subparsers."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module exposes ``register(subparsers)``; a subparser sets ``func(args) -> int``.
COMMAND_MODULES: tuple[str, ...] = (
    "gateway.cli.run",
    "gateway.cli.check_config",
    "gateway.cli.plugins",
    "gateway.cli.chat",
    "gateway.cli.bench",
    "gateway.cli.pairing",
    "gateway.cli.facts",
    "gateway.cli.distill",
    "gateway.cli.memory",
    "gateway.cli.sessions",
    "gateway.cli.jobs",
    "gateway.cli.worker",
    "gateway.cli.context",
    "gateway.cli.persona",
    "gateway.cli.users",
    "gateway.cli.usage",
    "gateway.cli.schedule",
    "gateway.cli.state",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kith", description="kith personal-assistant gateway")
    parser.add_argument("-c", "--config", default=None, help="config file (default: ./config.yaml if present)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
