"""Run a ``kith`` command in this process, in a worker thread (so a daemon started by the test keeps
serving on the event loop meanwhile), with its output captured: the CLI as a person types it, without
paying a new interpreter's imports on every call."""

from __future__ import annotations

import asyncio
import contextlib
import io

from gateway.cli.main import main


def _run(args: tuple[str, ...]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # load_or_exit and argparse exit this way
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


async def kith(*args: str, timeout: float = 180) -> tuple[int, str, str]:
    return await asyncio.wait_for(asyncio.to_thread(_run, args), timeout)
