"""A plugin for ``kith worker`` tests: registers jobs exactly as third-party plugins do."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gateway.bus import JobContext
from gateway.hookspecs import hookimpl


def touch(ctx: JobContext, payload: dict[str, Any]) -> None:
    # Proves the handler ran in the worker process, with a gateway in its context.
    Path(payload["path"]).write_text(f"{os.getpid()} {type(ctx.gateway).__name__} {ctx.attempt}")


@hookimpl
def gateway_register_jobs(register: Any) -> None:
    register(touch, name="touch", timeout=10)
