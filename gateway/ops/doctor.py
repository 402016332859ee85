"""``kith doctor``: is this install fit to run? One line per check, read-only, fast.

Every check only looks: it connects, asks and measures, and never creates, writes, binds, migrates or
starts anything (not even the data directory). They run at once, each under its own deadline, so the
whole run stays under about two seconds when all is well and under ``TIMEOUT_S`` plus a little when
something hangs. Status ``fail`` makes the command exit 1; ``warn`` is worth a look but not fatal;
``skip`` says what was not checked and why (docs/operations.md#doctor).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import aiohttp

from gateway.config import Config
from gateway.util.diskspace import MB, free_bytes

Status = Literal["ok", "warn", "fail", "skip"]
TIMEOUT_S = 1.5  # each probe's deadline unless ``kith doctor --timeout`` says otherwise
#: This run's probe deadline: a context variable, so the checks running at once (and in threads) see it.
_PROBE_S: contextvars.ContextVar[float] = contextvars.ContextVar("doctor_probe_s", default=TIMEOUT_S)
SKEW_WARN_S, SKEW_FAIL_S = 0.5, 5.0  # leases and locks (gateway/cluster) expire by Redis' clock
DEFAULT_BASE_URL = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str


CheckFn = Callable[[Config], Awaitable[list[Check]]] | Callable[[Config], list[Check]]


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return get() if callable(get) else (str(value) if value else None)


def state_url(config: Config) -> str | None:
    """``state.url`` when this kith has it (the PostgreSQL backend), else None (SQLite)."""
    return _secret(getattr(getattr(config, "state", None), "url", None))


# ------------------------------------------------------------------------------------------- checks


def check_data_dir(config: Config) -> list[Check]:
    d = Path(config.data_dir)
    if not d.exists():
        return [Check("data dir", "warn", f"{d} does not exist yet (kith run creates it)")]
    if not d.is_dir():
        return [Check("data dir", "fail", f"{d} is not a directory")]
    if not os.access(d, os.W_OK | os.X_OK):
        return [Check("data dir", "fail", f"{d} is not writable by this account")]
    mode = stat.S_IMODE(d.stat().st_mode)
    if mode & 0o077:
        return [Check("data dir", "warn", f"{d} is mode {mode:o}: other accounts may read memories (chmod 700)")]
    out = [Check("data dir", "ok", f"{d} (mode {mode:o})")]
    token = d / "operator.token"
    if token.exists() and stat.S_IMODE(token.stat().st_mode) & 0o077:
        out.append(Check("operator token", "warn", f"{token} is readable by other accounts (chmod 600)"))
    return out


def check_disk(config: Config) -> list[Check]:
    free = free_bytes(Path(config.data_dir))
    floor = config.memory.min_free_mb * MB
    text = f"{free / MB:,.0f} MB free on the filesystem of {config.data_dir}"
    if floor and free < floor:
        return [Check("disk", "fail", f"{text}, below memory.min_free_mb ({floor / MB:.0f} MB): indexing pauses")]
    if floor and free < 2 * floor:
        return [Check("disk", "warn", f"{text}, less than twice memory.min_free_mb ({floor / MB:.0f} MB)")]
    return [Check("disk", "ok", text)]


def _http_host(config: Config) -> str:
    host = config.server.host
    return "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else ("::1" if host == "::" else host)


async def check_port(config: Config) -> list[Check]:
    """Free (nothing listens: ``kith run`` can bind), or held by a kith daemon (its /healthz answers)."""
    port, host = config.server.port, _http_host(config)
    if port == 0:
        return [Check("port", "skip", "server.port is 0 (a free port is picked at start)")]
    try:
        _, writer = await asyncio.open_connection(host, port)
    except OSError:
        return [Check("port", "ok", f"{host}:{port} is free (no daemon running)")]
    writer.close()
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/healthz"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_PROBE_S.get())) as http, \
                http.get(url, headers={"Host": f"127.0.0.1:{port}"}) as r:  # fmt: skip
            body = await r.json(content_type=None)
    except (aiohttp.ClientError, ValueError, TimeoutError):
        return [Check("port", "fail", f"{host}:{port} is taken by something that is not a kith daemon")]
    if not isinstance(body, dict) or "status" not in body:
        return [Check("port", "fail", f"{host}:{port} is taken by something that is not a kith daemon")]
    daemon = f"{host}:{port}: a kith daemon answers (up {body.get('uptime_s', '?')} s)"
    if body["status"] != "ok":
        return [Check("port", "warn", f"{daemon}, degraded: {'; '.join(body.get('degraded') or [])}")]
    return [Check("port", "ok", daemon)]


async def check_redis(config: Config) -> list[Check]:
    from gateway.bus.connect import check_server, describe, make_client
    from gateway.bus.server import socket_path

    cfg = config.bus
    external = cfg.url is not None or bool(cfg.sentinel_master)
    where = describe(cfg, Path(config.data_dir))
    if not external and not socket_path(Path(config.data_dir)).exists():
        return [Check("redis", "skip", "embedded server, started by kith run (not running now)"),
                Check("clock", "skip", "the embedded Redis shares this machine's clock")]
    client = make_client(cfg, Path(config.data_dir))
    try:
        version = await check_server(client, where)
        before = time.time()
        sec, usec = await client.time()
        after = time.time()
    except Exception as exc:  # every failure of the server is this check's answer
        return [Check("redis", "fail", f"{where}: {exc}"), Check("clock", "skip", "Redis did not answer")]
    finally:
        await client.aclose()
    out = [Check("redis", "ok", f"{where}: {version}")]
    if not external:
        out.append(Check("clock", "skip", "the embedded Redis shares this machine's clock"))
        return out
    skew = (sec + usec / 1e6) - (before + after) / 2
    text = f"this machine is {abs(skew):.3f} s {'behind' if skew > 0 else 'ahead of'} Redis TIME"
    status: Status = "fail" if abs(skew) > SKEW_FAIL_S else "warn" if abs(skew) > SKEW_WARN_S else "ok"
    out.append(Check("clock", status, text + ("" if status == "ok" else " (sync the clocks: NTP)")))
    return out


async def check_memory_jobs(config: Config) -> list[Check]:
    """Dead-lettered and repeatedly failing memory jobs (gateway/ops/memory_jobs.py): a writer whose
    answers are unusable otherwise fails quietly while everything else looks well."""
    from gateway.bus.connect import make_client
    from gateway.bus.keys import Keys
    from gateway.bus.server import socket_path
    from gateway.ops.memory_jobs import memory_jobs

    cfg = config.bus
    external = cfg.url is not None or bool(cfg.sentinel_master)
    if not external and not socket_path(Path(config.data_dir)).exists():
        return [Check("memory jobs", "skip", "the embedded Redis is not running (kith run starts it)")]
    client = make_client(cfg, Path(config.data_dir))
    try:
        found = await memory_jobs(client, Keys(cfg.prefix))
    except Exception as exc:  # the redis check says what is wrong with the server
        return [Check("memory jobs", "skip", f"Redis did not answer: {type(exc).__name__}")]
    finally:
        await client.aclose()
    if found.ok:
        return [Check("memory jobs", "ok", "none dead-lettered or failing repeatedly")]
    hint = " (kith jobs dead; kith jobs retry ID)" if found.dead else ""
    return [Check("memory jobs", "warn", "; ".join(found.problems()) + hint)]


async def check_state(config: Config) -> list[Check]:
    url = state_url(config)
    if url:
        return await _check_postgres(url)
    return await asyncio.to_thread(_check_sqlite, config)


def _check_sqlite(config: Config) -> list[Check]:
    path = Path(config.data_dir) / "state.sqlite"
    if not path.exists():
        return [Check("state", "warn", f"{path} does not exist yet (kith run creates it)")]
    with path.open("rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        return [Check("state", "fail", f"{path} is not a SQLite database")]
    return [Check("state", "ok", f"SQLite {path} ({path.stat().st_size / MB:,.1f} MB)")]


async def _check_postgres(url: str) -> list[Check]:
    parts = urlsplit(url)
    where = f"postgresql://{parts.hostname or ''}{':' + str(parts.port) if parts.port else ''}{parts.path}"
    try:
        import psycopg
    except ImportError:
        return [Check("state", "fail", f"{where}: psycopg is not installed")]
    try:
        conn = await psycopg.AsyncConnection.connect(url, connect_timeout=max(1, int(_PROBE_S.get())))
    except Exception as exc:
        return [Check("state", "fail", f"{where}: {str(exc).strip().splitlines()[0] if str(exc) else exc!r}")]
    try:
        version = conn.info.server_version
        # psycopg is installed, so the backend is: its query lives with the backend's other SQL
        from gateway.state.postgres.fulltext import describe

        folds, text = await describe(conn)
    except psycopg.Error as exc:
        folds, text = False, f"full-text search not checked: {str(exc).strip().splitlines()[0]}"
    finally:
        await conn.close()
    return [Check("state", "ok", f"PostgreSQL {version // 10000}.{version % 10000} at {where}"),
            Check("full text", "ok" if folds else "warn", text)]


async def check_index(config: Config) -> list[Check]:
    mem = config.memory
    if mem.qdrant_url:
        headers = {"api-key": mem.qdrant_api_key.get_secret_value()} if mem.qdrant_api_key else {}
        url = mem.qdrant_url.rstrip("/") + "/readyz"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_PROBE_S.get())) as http, \
                    http.get(url, headers=headers) as r:  # fmt: skip
                ok = r.status == 200
                status = r.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            return [Check("index", "fail", f"Qdrant server {mem.qdrant_url}: {type(exc).__name__}")]
        return [Check("index", "ok" if ok else "fail", f"Qdrant server {mem.qdrant_url}: /readyz {status}")]
    cluster = getattr(config, "cluster", None)
    if cluster is not None and cluster.enabled and not cluster.node_id:
        return [Check("index", "skip", "embedded, one per node, named by the daemon's pid (set cluster.node_id, "
                                       "or memory.qdrant_url for a shared Qdrant server)")]
    try:  # per node in a cluster (gateway/cluster/node.py), else <data_dir>/qdrant
        from gateway.cluster.node import embedded_index_dir

        root = embedded_index_dir(config)
    except ImportError:
        root = Path(config.data_dir) / "qdrant"
    return await asyncio.to_thread(_check_embedded_index, root)


def _check_embedded_index(root: Path) -> list[Check]:
    if not root.exists():
        return [Check("index", "warn", f"embedded, {root} does not exist yet (built from the Markdown at start)")]
    size = sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())  # allocated, not sparse size
    return [Check("index", "ok", f"embedded {root} ({size / MB:,.1f} MB)")]


async def check_models(config: Config) -> list[Check]:
    """Each model role: its provider's server answers HTTP (each distinct server asked once)."""
    out: list[Check] = []
    remote: list[tuple[str, str]] = []  # (role, base url)
    for role in config.llm.role_names():
        rc = config.llm.role(role)
        name = f"model {role}"
        if rc.provider == "echo":
            out.append(Check(name, "ok", "echo (no model: replies digest the prompt)"))
        elif (rc.api_key is None or not rc.api_key.get_secret_value()) and not (rc.provider == "openai"
                                                                                and rc.base_url):
            out.append(Check(name, "warn", f"{rc.provider}: no API key (docs/models.md); turns say how to set one"))
        else:
            remote.append((role, rc.base_url or DEFAULT_BASE_URL.get(rc.provider, "")))
    bases = list(dict.fromkeys(base for _, base in remote))
    answers = dict(zip(bases, await asyncio.gather(*(_reach(b) for b in bases)), strict=True))
    for role, base in remote:
        rc = config.llm.role(role)
        status, why = answers[base]
        out.append(Check(f"model {role}", status, f"{rc.provider} {rc.model} at {base}: {why}"))
    return out


async def _reach(base: str) -> tuple[Status, str]:
    """Any HTTP answer means the server is reachable (no key is sent: a 401/404 is still an answer)."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_PROBE_S.get())) as http, \
                http.get(base, allow_redirects=False) as r:  # fmt: skip
            return "ok", f"reachable (HTTP {r.status})"
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return "fail", f"unreachable ({type(exc).__name__})"


async def check_channels(config: Config) -> list[Check]:
    """Each enabled channel's own checks (``ChannelConfig.doctor``: credentials, platform reachable)."""
    sections = [(name, s) for name, s in config.channels.sections().items() if s.enabled]
    answers = await asyncio.gather(*(s.doctor(config) for _, s in sections), return_exceptions=True)
    out: list[Check] = []
    for (name, _), answer in zip(sections, answers, strict=True):
        if isinstance(answer, BaseException):
            out.append(Check(f"channel {name}", "fail", f"{type(answer).__name__}: {answer}"))
            continue
        out.extend(Check(f"channel {name}", status, detail) for status, detail in answer  # type: ignore[misc]
                   if status in ("ok", "warn", "fail", "skip"))
    return out


CHECKS: tuple[tuple[str, CheckFn], ...] = (
    ("data dir", check_data_dir), ("disk", check_disk), ("port", check_port), ("state", check_state),
    ("redis", check_redis), ("memory jobs", check_memory_jobs), ("index", check_index), ("model", check_models),
    ("channels", check_channels),
)


async def run_checks(config: Config, *, probe_s: float = TIMEOUT_S) -> list[Check]:
    """Every check at once; a probe waits at most ``probe_s`` and a whole check half a second more."""
    _PROBE_S.set(probe_s)
    timeout_s = probe_s + 0.5
    async def bounded(name: str, fn: CheckFn) -> list[Check]:
        try:
            if inspect.iscoroutinefunction(fn):
                return await asyncio.wait_for(fn(config), timeout_s)
            # file-system checks in a thread: a hung mount must not hold the others up
            return await asyncio.wait_for(asyncio.to_thread(fn, config), timeout_s)  # type: ignore[arg-type]
        except TimeoutError:
            return [Check(name, "fail", f"no answer within {timeout_s:.1f} s")]
        except Exception as exc:
            return [Check(name, "fail", f"{type(exc).__name__}: {exc}")]

    results = await asyncio.gather(*(bounded(name, fn) for name, fn in CHECKS))
    return [c for group in results for c in group]
