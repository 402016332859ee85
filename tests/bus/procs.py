"""Worker processes for the process-level tests, restarted when they die (like a supervisor would)."""

from __future__ import annotations

import asyncio
import random
import signal
import sys
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]


class Workers:
    """Two worker processes, restarted as soon as they die."""

    def __init__(self, data_dir: Path, db: Path, logs: Path, claim_idle_ms: int = 1000) -> None:
        self.args = [sys.executable, "-m", "tests.bus.chaos_worker", str(data_dir), str(db), str(claim_idle_ms)]
        self.stopping = False
        self.logs = logs
        self.procs: list[asyncio.subprocess.Process | None] = [None, None]
        self.ready = [asyncio.Event(), asyncio.Event()]
        self.starts = 0

    async def start(self, slot: int) -> None:
        self.ready[slot].clear()
        with self._log(slot) as log:
            proc = await asyncio.create_subprocess_exec(
                *self.args, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=log
            )
        self.procs[slot] = proc
        self.starts += 1
        assert proc.stdout is not None
        line = await proc.stdout.readline()
        if line.strip() == b"ready":
            self.ready[slot].set()

    def _log(self, slot: int) -> IO[bytes]:
        return open(self.logs / f"worker{slot}.log", "ab")

    async def kill_random(self) -> None:
        ready = [i for i in (0, 1) if self.ready[i].is_set()]
        if not ready:
            await asyncio.wait(
                [asyncio.ensure_future(e.wait()) for e in self.ready], return_when=asyncio.FIRST_COMPLETED
            )
            ready = [i for i in (0, 1) if self.ready[i].is_set()]
        slot = random.choice(ready)
        proc = self.procs[slot]
        assert proc is not None
        self.ready[slot].clear()
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        asyncio.get_running_loop().create_task(self.start(slot))

    async def stop(self) -> None:
        self.stopping = True
        for proc in self.procs:
            if proc is not None and proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            if proc is not None:
                await asyncio.wait_for(proc.wait(), 30)

    async def supervise(self) -> None:
        """Restart whichever worker exits on its own (a poison job killing it) until stopped."""
        self.stopping = False
        while not self.stopping:
            for slot, proc in enumerate(self.procs):
                if proc is not None and proc.returncode is not None and not self.stopping:
                    self.procs[slot] = None
                    await self.start(slot)
            await asyncio.sleep(0.05)
