"""Helpers shared by CLI commands: config loading with the all-errors-at-once report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.config import Config, ConfigError, load_config

DEFAULT_CONFIG = "config.yaml"


def config_path(args: argparse.Namespace) -> str | None:
    path = getattr(args, "config", None)
    if path:
        return str(path)
    return DEFAULT_CONFIG if Path(DEFAULT_CONFIG).exists() else None


def load_or_exit(args: argparse.Namespace) -> Config:
    try:
        return load_config(config_path(args))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(2) from None
