"""Connect to the bus's Redis: the embedded server, a URL (password, ``rediss://`` TLS) or Sentinel."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio as aredis
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.bus.errors import ServerError
from gateway.bus.server import driver_info, socket_path
from gateway.config import BusConfig

MIN_VERSION = (6, 2)  # XAUTOCLAIM and XPENDING IDLE arrived in 6.2


def _common() -> dict[str, object]:
    # Short client-side retries only: the worker loops own longer outages (backoff, reconnect), and
    # every bus script is safe to repeat (idempotent enqueue, ownership-checked settle).
    return {
        "decode_responses": True,
        "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 2),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
        "health_check_interval": 30,
        # Reply shapes differ between RESP2 and RESP3 (XREADGROUP is a list in one, a map in the
        # other); the bus pins RESP2 so a redis-py default or a URL option cannot change them.
        "protocol": 2,
        "driver_info": driver_info(),
    }


def _without_protocol(url: str) -> str:
    """URL options override keywords in redis-py: drop a ``protocol=`` so RESP2 stays pinned."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "protocol"]
    return urlunsplit(parts._replace(query=urlencode(query)))


def describe(cfg: BusConfig, data_dir: Path) -> str:
    """Where the bus lives, without secrets (for logs and errors)."""
    if cfg.sentinel_master:
        return f"sentinel master {cfg.sentinel_master!r} via {', '.join(cfg.sentinels)}"
    if cfg.url is not None:
        parts = urlsplit(cfg.url.get_secret_value())
        return f"{parts.scheme}://{parts.hostname or ''}{':' + str(parts.port) if parts.port else ''}{parts.path}"
    return f"embedded server at {socket_path(data_dir)}"


def make_client(cfg: BusConfig, data_dir: Path) -> aredis.Redis:
    if cfg.sentinel_master:
        conn: dict[str, object] = {}
        if cfg.url is not None:
            url = cfg.url.get_secret_value()
            conn = {k: v for k, v in parse_url(url).items() if k not in ("host", "port", "path", "connection_class")}
            if urlsplit(url).scheme == "rediss":
                conn["ssl"] = True
        hosts = []
        for item in cfg.sentinels:
            host, _, port = item.rpartition(":")
            hosts.append((host or item, int(port or 26379)))
        sentinel_kwargs = {"password": cfg.sentinel_password.get_secret_value()} if cfg.sentinel_password else {}
        sentinel = Sentinel(hosts, sentinel_kwargs=sentinel_kwargs, **conn)
        return sentinel.master_for(cfg.sentinel_master, **_common())  # type: ignore[arg-type]
    if cfg.url is not None:
        return aredis.Redis.from_url(_without_protocol(cfg.url.get_secret_value()), **_common())  # type: ignore[arg-type]
    sock = socket_path(data_dir)
    if not sock.exists():
        raise ServerError(
            f"no embedded Redis is running for data_dir {data_dir} (no socket {sock}): "
            "start `kith run`, which owns the embedded server, or set bus.url"
        )
    return aredis.Redis(unix_socket_path=str(sock), **_common())  # type: ignore[arg-type]


async def check_server(client: aredis.Redis, where: str) -> str:
    """Ping and require Redis >= 6.2 (Valkey reports a compatible ``redis_version``)."""
    try:
        info = await client.info("server")
    except RedisError as exc:
        raise ServerError(f"cannot reach Redis ({where}): {exc}") from exc
    version = str(info.get("redis_version", "0"))
    require_version(version, where)
    if info.get("valkey_version"):
        return f"valkey {info['valkey_version']}"
    return f"redis {version}"


def require_version(version: str, where: str) -> tuple[int, ...]:
    parsed = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if parsed < MIN_VERSION:
        raise ServerError(
            f"Redis {version} ({where}) is too old: kith's job bus needs Redis >= 6.2 "
            "(XAUTOCLAIM, XPENDING with IDLE); upgrade the server or unset bus.url to use the embedded one"
        )
    return parsed
