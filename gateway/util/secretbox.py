"""Secrets at rest in the data directory: files written private from the first byte, and the data
dir's one Fernet key (``secrets.key``) that encrypts the model key the web set-up stores
(gateway/llm/setup.py) and each person's tool credentials (plugins/tools/credentials.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

KEY_FILE = "secrets.key"


def write_private(path: Path, data: bytes) -> None:
    """``data`` to ``path``, mode 0600 from the first byte (temp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def data_dir_fernet(data_dir: Path) -> Any:
    """The data dir's Fernet (``cryptography``), its key made on first use."""
    from cryptography.fernet import Fernet

    path = Path(data_dir) / KEY_FILE
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        key = Fernet.generate_key()
        write_private(path, key)
    return Fernet(key)
