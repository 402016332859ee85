"""A real Gateway with Telegram, Discord and Nextcloud enabled, each pointed at its local fake.

Nothing of ours is replaced: the adapters run under the gateway's supervisor, messages go through the
real turn pipeline (access plugin, dedupe, identities, sessions) and the model is the ``echo``
provider or the Anthropic fake driven through the real SDK.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from gateway.app import Gateway
from gateway.configread import parse_config
from gateway.plugins import BUILTIN_PLUGINS
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.nextcloud import FakeNextcloud
from tests.fakes.telegram_api import FakeTelegram
from tests.storage import select_one, select_rows

TG_TOKEN = "424242:kith-test-token"
DC_TOKEN = "discord-bot-token.kith"
NC_SECRET = "0123456789abcdef" * 4
TG_WEBHOOK_SECRET = "Kith_webhook-secret_0123456789"
FAST = {"send_rate_per_s": 1000, "send_burst": 1000}
# The watchdog's "received nothing" limit. A few seconds restarted adapters under a loaded parallel
# run (a worker starved of CPU past the limit): a restart no longer drops the turn in flight
# (tests/channels/test_restart_midturn.py), but the tests here are about other things and would see a
# streamed reply cut and handed over. The supervision tests that wait for a restart set a short limit.
STALL_S = 10

# Ada's accounts on the three platforms.
ADA_TG = 1001
ADA_DC = 2001
ADA_NC = "ada"
ADA_ROOM = "ada-dm"


def channel_plugins() -> tuple[Any, ...]:
    """Our plugins, unless the host already lists them as built-ins (pluggy refuses duplicates)."""
    return tuple(
        importlib.import_module(name) for name in ("adapters.builtin", "plugins.access") if name not in BUILTIN_PLUGINS
    )


@dataclass
class Rig:
    gw: Gateway
    tg: FakeTelegram
    dc: FakeDiscord
    nc: FakeNextcloud
    http: aiohttp.ClientSession
    config_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.gw.port}"

    def select_rows(self, sql: str, *args: Any) -> list[Any]:
        return select_rows(self.gw.state, sql, *args)

    def count_rows(self, sql: str, *args: Any) -> int:
        row = select_one(self.gw.state, sql, *args)
        return int(row[0]) if row is not None else 0

    def turns(self, channel: str | None = None) -> int:
        if channel is None:
            return self.count_rows("SELECT COUNT(*) FROM turns WHERE role='user'")
        return self.count_rows("SELECT COUNT(*) FROM turns WHERE role='user' AND channel=?", channel)

    def health(self, name: str) -> dict[str, Any]:
        return self.gw.supervisor.health()[name]

    async def nc_say(self, text: str, *, room: str = ADA_ROOM, user: str = ADA_NC, **kw: Any) -> int:
        return await self.nc.say(self.http, room=room, user=user, text=text,
                                 url=f"{self.base}/nextcloud/webhook", **kw)

    async def tg_say(self, text: str, *, user_id: int = ADA_TG, **kw: Any) -> dict[str, Any]:
        update = self.tg.make_update(user_id=user_id, text=text, **kw)
        await self.tg.push(update)
        return update

    async def dc_say(self, text: str, *, user_id: int = ADA_DC, **kw: Any) -> dict[str, Any]:
        return await self.dc.say(user_id=user_id, content=text, **kw)

    async def stop(self) -> None:
        await self.gw.close()
        await self.http.close()
        for fake in (self.tg, self.dc, self.nc):
            await fake.close()


async def start_rig(
    tmp_path: Path,
    *,
    llm: dict[str, Any] | None = None,
    access: dict[str, Any] | None = None,
    telegram: dict[str, Any] | None = None,
    discord: dict[str, Any] | None = None,
    nextcloud: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    watchdog_interval: float = 0.2,
    plugins: tuple[Any, ...] = (),
) -> Rig:
    tg, dc, nc = FakeTelegram(token=TG_TOKEN), FakeDiscord(token=DC_TOKEN), FakeNextcloud(secret=NC_SECRET)
    await tg.start()
    await dc.start()
    await nc.start()
    allow = access if access is not None else {"dm_policy": "allowlist"}
    data: dict[str, Any] = {
        "data_dir": str(tmp_path / "data"),
        "llm": llm or {"provider": "echo"},
        "server": {"port": 0},
        "plugins": {"entry_points": False},
        "channels": {
            "telegram": {"enabled": True, "token": TG_TOKEN, "base_url": tg.base_url, "poll_timeout_s": 1,
                         "stall_after_s": STALL_S, "allow_from": [str(ADA_TG)], **FAST, **allow, **(telegram or {})},
            "discord": {"enabled": True, "token": DC_TOKEN, "api_base": dc.api_base, "gateway_url": dc.gateway_url,
                        "stall_after_s": STALL_S, "allow_from": [str(ADA_DC)], **FAST, **allow, **(discord or {})},
            "nextcloud": {"enabled": True, "base_url": nc.base_url, "bot_secret": NC_SECRET, "dm_rooms": [ADA_ROOM],
                          "allow_from": [f"users/{ADA_NC}"], **FAST, **allow, **(nextcloud or {})},
        },
        **(extra or {}),
    }
    config_path = tmp_path / "config.yaml"
    config_path.write_text(json.dumps(data))  # JSON is YAML: the CLI reads the very same file
    gw = Gateway(parse_config(data, env={}), plugins=(*channel_plugins(), *plugins), entry_points=False)
    gw.supervisor.watchdog_interval = watchdog_interval
    gw.supervisor.base_delay = 0.1  # tests wait for restarts, not for production backoff
    gw.supervisor.max_delay = 0.5
    await gw.__aenter__()
    rig = Rig(gw=gw, tg=tg, dc=dc, nc=nc, http=aiohttp.ClientSession(), config_path=config_path)
    nc.bot_url = f"{rig.base}/nextcloud/webhook"
    await wait_for(lambda: all(rig.health(n)["state"] == "running" for n in ("telegram", "discord", "nextcloud")))
    await dc.wait_ready()
    tg_adapter = gw.adapters["telegram"]
    await asyncio.wait_for(tg_adapter.ready.wait(), 10)  # type: ignore[attr-defined]
    return rig


async def wait_for(predicate: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what or "condition not reached")
        await asyncio.sleep(0.02)
