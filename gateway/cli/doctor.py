"""``kith doctor``: one line per check of this install (config, data dir, disk, port, state, Redis,
memory jobs, index, model reachability, clock); exit 1 when a check fails, 2 when the config itself is
invalid. Dead-lettered or repeatedly failing memory jobs are a warning (gateway/ops/memory_jobs.py).
Read-only: nothing is created or changed (gateway/ops/doctor.py, docs/operations.md#doctor)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING

from gateway.cli.common import config_path
from gateway.config import ConfigError
from gateway.configread import load_config

if TYPE_CHECKING:
    from gateway.ops.doctor import Check

MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("doctor", help="check this install: config, ports, disk, Redis, memory jobs, state, index, "
                                      "models, clock")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds each probe may take (default 1.5; raise it for a slow remote database or a "
                        "loaded machine)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gateway.ops.doctor import TIMEOUT_S, Check, run_checks

    started = time.monotonic()
    probe_s = TIMEOUT_S if args.timeout is None else args.timeout
    if not 0 < probe_s <= 600:
        print("kith doctor: --timeout must be more than 0 and at most 600 seconds", file=sys.stderr)
        return 2
    path = config_path(args)
    try:
        config = load_config(path)
    except ConfigError as exc:
        checks = [Check("config", "fail", f"{path}: {len(exc.problems)} problem(s)")]
        _print(checks, args, started)
        for problem in exc.problems:
            print(f"      {problem}", file=sys.stderr)
        return 2
    checks = [Check("config", "ok", f"{path or '(defaults, no config.yaml)'}: valid"),
              *asyncio.run(run_checks(config, probe_s=probe_s))]
    _print(checks, args, started)
    return 1 if any(c.status == "fail" for c in checks) else 0


def _print(checks: list[Check], args: argparse.Namespace, started: float) -> None:
    if args.json:
        print(json.dumps({"checks": [{"name": c.name, "status": c.status, "detail": c.detail} for c in checks],
                          "seconds": round(time.monotonic() - started, 3)}))
        return
    width = max(len(c.name) for c in checks)
    for c in checks:
        print(f"{MARK[c.status]}  {c.name:<{width}}  {c.detail}")
