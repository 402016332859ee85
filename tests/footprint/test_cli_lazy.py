"""``kith --help`` and the commands that open no index import only what they use: no model SDKs,
no onnxruntime, no Qdrant (seconds of start-up otherwise, docs/benchmarks.md "Footprint"). Checked
on ``sys.modules`` of a fresh interpreter, not by timing (the machine is shared)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from gateway.cli.main import COMMAND_MODULES, COMMANDS, build_parser
from tests.kith_run import ROOT, write_config

HEAVY = ("anthropic", "openai", "onnxruntime", "tokenizers", "qdrant_edge", "qdrant_client", "telegram", "discord",
         "pypdf", "numpy", "gateway.app")

_PROBE = """
import json, sys
from gateway.cli.main import main
for argv in json.loads(sys.argv[1]):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    print(json.dumps({"argv": argv, "code": code}), file=sys.stderr)
heavy = json.loads(sys.argv[2])
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def _imported(*argvs: list[str]) -> list[str]:
    res = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(argvs)), json.dumps(HEAVY)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    return list(json.loads(res.stdout.strip().splitlines()[-1]))


def test_help_imports_no_command_module_sdk_or_model() -> None:
    assert _imported(["--help"]) == []


def test_commands_without_an_index_neither_import_nor_open_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cfg = str(write_config(tmp_path / "config.yaml", data, 18799))
    assert _imported(["-c", cfg, "pairing", "list"], ["-c", cfg, "persona", "list"], ["-c", cfg, "usage"],
                     ["-c", cfg, "schedule", "list"], ["-c", cfg, "facts", "list", "--user", "ada"],
                     ["run", "--help"], ["memory", "--help"]) == []
    assert not (data / "qdrant").exists()  # nothing created (or opened) an index


def _top_level(parser: argparse.ArgumentParser) -> dict[str, str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: choice.help or "" for choice in sub._choices_actions}


def test_the_command_table_matches_what_each_module_registers() -> None:
    # Every command module is in the table (a missing one would be imported on every call) ...
    assert set(COMMAND_MODULES) <= {module for module, _help in COMMANDS.values()}
    # ... and the table says what the modules say: `kith --help` lists exactly the real commands.
    real = _top_level(build_parser())
    assert real == {name: help_line for name, (_module, help_line) in COMMANDS.items()}
    assert _top_level(build_parser(["--help"])) == real
    # The named command gets its real parser (with its own options), the others only a name.
    args = build_parser(["run", "--port", "9"]).parse_args(["run", "--port", "9"])
    assert args.port == 9 and callable(args.func)
