"""``kith`` command line: one module per command group, each registering its own subparsers.

Start-up matters here: importing every command module (and with them the gateway, the SDKs and the
embedder's libraries) took seconds, paid by ``kith --help`` and every small command. So the top-level
commands and their one-line help are listed in ``COMMANDS``, and an invocation imports only the module
of the command it names; ``kith --help`` imports none (tests/footprint/test_cli_lazy.py checks that
the table matches what each module registers).
"""

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
    "gateway.cli.doctor",
    "gateway.cli.backup",
    "gateway.cli.restore",
    "gateway.cli.service",
    "gateway.cli.skills",
)

# command -> (the module that registers it, its help line exactly as that module gives it).
# A module of COMMAND_MODULES without an entry here still works: it is imported on every call.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("gateway.cli.run", "run the gateway daemon"),
    "check-config": ("gateway.cli.check_config", "validate a configuration file (exit 0 or 2)"),
    "plugins": ("gateway.cli.plugins", "list plugins, their source and hooks"),
    "chat": ("gateway.cli.chat", "chat with the running daemon from the terminal"),
    "bench": ("gateway.cli.bench", "run a benchmark (prints JSON)"),
    "pairing": ("gateway.cli.pairing", "approve or deny people who asked to talk to the bot"),
    "facts": ("gateway.cli.facts", "inspect and edit the knowledge graph"),
    "distill": ("gateway.cli.distill", "run a memory distillation tier (short | mid | long) for one user"),
    "memory": ("gateway.cli.memory", "search, inspect and rebuild the memory index"),
    "sessions": ("gateway.cli.sessions", "search past session logs"),
    "jobs": ("gateway.cli.jobs", "job bus: queue status, dead letters, retry"),
    "worker": ("gateway.cli.worker", "run job workers only (scale-out; any number of processes)"),
    "context": ("gateway.cli.context", "show the prompt the model would get for a message (section by section)"),
    "persona": ("gateway.cli.persona", "create and list personas"),
    "users": ("gateway.cli.users", "the people kith knows: list, show, export, delete, import"),
    "usage": ("gateway.cli.usage", "model tokens and cost per person, role and day"),
    "state": ("gateway.cli.state", "the state database: move a SQLite install to PostgreSQL"),
    "schedule": ("gateway.cli.schedule", "reminders, scheduled prompts and task alerts: list, show, cancel"),
    "doctor": ("gateway.cli.doctor",
               "check this install: config, ports, disk, Redis, memory jobs, state, index, models, clock"),
    "backup": ("gateway.cli.backup", "write a consistent backup of state, Markdown memory and personas"),
    "restore": ("gateway.cli.restore", "restore a backup into a new data directory"),
    "service": ("gateway.cli.service", "systemd unit files for this install"),
    "skills": ("gateway.cli.skills", "list skills and show one's instructions"),
}


def _command(argv: Sequence[str]) -> str | None:
    """The command an argument list names (the first word that is not an option of ``kith`` itself)."""
    args = iter(argv)
    for arg in args:
        if arg in ("-c", "--config"):
            next(args, None)  # its value
        elif not arg.startswith("-"):
            return arg
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: the named command's module registers its real subparser; every other
    command is listed by name and help only. ``argv=None`` registers every module (tests, docs)."""
    parser = argparse.ArgumentParser(prog="kith", description="kith personal-assistant gateway")
    parser.add_argument("-c", "--config", default=None, help="config file (default: ./config.yaml if present)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = None if argv is None else _command(argv)
    listed = {module for module, _help in COMMANDS.values()}
    for name, (module, help_line) in COMMANDS.items():
        if argv is None or name == chosen:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=help_line)
    for module in COMMAND_MODULES:
        if module not in listed:
            importlib.import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
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
