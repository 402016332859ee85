"""Who owns a delivery: the names of this process's consumers, and whether another one's process is gone.

A delivery whose worker died is normally taken over once it has gone ``claim_idle_ms`` without a
heartbeat (``upkeep.claim_loop``), the only sign of death a worker on another machine gives. On the
same machine there is a better one: the process is gone. A consumer is named ``host:pid:token:space``,
``space`` standing for the kernel boot and the PID namespace its process ran in; a starting worker that
finds consumers of its own host and space whose process no longer exists (or whose pid is its own
while the name is not one of this process's: a restarted container's daemon is pid 1 again) takes
their deliveries at once. So a daemon restarted after a crash picks up the jobs the crash interrupted
without waiting 30-45 s, and nothing is taken from a worker that may still be alive: a process that
exists (perhaps another one reusing the pid), another machine or namespace, or a name without a space
(an older kith) is left to the idle time.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
from pathlib import Path


def _space() -> str:
    """The kernel boot and PID namespace of this process, in 8 hex digits ("" where not knowable)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return hashlib.blake2b(f"{boot}\x00{namespace}".encode(), digest_size=4).hexdigest()


_SPACE = _space()
_MINE: set[str] = set()  # consumers of live workers in this process (tests run several in one)


def new_consumer() -> str:
    """A fresh consumer name for a worker of this process (``release`` it when the worker ends)."""
    name = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
    if _SPACE:
        name = f"{name}:{_SPACE}"
    _MINE.add(name)
    return name


def release(name: str) -> None:
    """The worker has ended: what it still owns may be taken over like a dead worker's."""
    _MINE.discard(name)


def is_gone(name: str) -> bool:
    """Whether the consumer ``name`` certainly belonged to a process that no longer exists."""
    if not _SPACE or name in _MINE:
        return False
    parts = name.rsplit(":", 3)
    if len(parts) != 4:
        return False
    host, pid, _token, space = parts
    if host != socket.gethostname() or space != _SPACE or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return True  # our pid, not our name: an earlier process that had this pid
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists, owned by another user
    return False
