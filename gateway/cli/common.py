"""Helpers shared by CLI commands: config loading with the all-errors-at-once report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.config import Config, ConfigError
from gateway.configread import load_config
from gateway.memory.files.scopes import ScopeError, root_for, user_scope
from gateway.memory.files.store import MemoryStore
from gateway.memory.files.stores import Stores

DEFAULT_CONFIG = "config.yaml"


def config_path(args: argparse.Namespace) -> str | None:
    path = getattr(args, "config", None)
    if path:
        return str(path)
    return DEFAULT_CONFIG if Path(DEFAULT_CONFIG).exists() else None


def user_store(config: Config, user: str) -> MemoryStore | None:
    """A user's existing memory store for commands that work on the files alone; None (after saying
    why on stderr) for an invalid user id or a user with no memory."""
    try:
        root = root_for(config.data_dir, user_scope(user))
    except ScopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    if not root.is_dir():
        print(f"error: no memory for user {user!r}", file=sys.stderr)
        return None
    return Stores.of(config).unwatched(root)


def load_or_exit(args: argparse.Namespace) -> Config:
    try:
        return load_config(config_path(args))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(2) from None
