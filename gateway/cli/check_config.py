"""``kith check-config [FILE]``: validate a config, list every problem, exit 0 or 2."""

from __future__ import annotations

import argparse
import sys

from gateway.cli.common import config_path
from gateway.config import ConfigError
from gateway.configread import load_config
from gateway.plugins import build_plugin_host
from gateway.registrations import collect_registrations


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("check-config", help="validate a configuration file (exit 0 or 2)")
    p.add_argument("file", nargs="?", help="config file (default: -c or ./config.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = args.file or config_path(args)
    try:
        cfg = load_config(path)
        # Plugins that fail to import, reject their own config section, or register a name twice are
        # config problems too: found here, not first at `kith run`.
        host = build_plugin_host(cfg)
        host.hooks.configure(cfg)
        collect_registrations(host.hooks, cfg)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"{path or '(defaults)'}: OK")
    return 0
