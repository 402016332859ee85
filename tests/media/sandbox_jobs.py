"""Jobs the sandbox tests hand to reader workers. A worker imports this module to unpickle a job,
so it imports next to nothing: a fresh worker is ready in milliseconds, as with the real reader."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from gateway.media.errors import TooLarge

MIB = 1024 * 1024


def echo(value: Any) -> Any:
    return value


def hog(mib: int) -> int:
    chunks = [bytearray(MIB) for _ in range(mib)]  # touched, so the address space is really used
    return len(chunks)


def spin() -> None:
    while True:
        pass


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def refuse(message: str) -> None:
    raise TooLarge(message)


def crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)
