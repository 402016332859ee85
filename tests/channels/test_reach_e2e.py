"""Matrix, Slack, Signal and WhatsApp end to end, through the real Gateway, loaded as a third party's channels are:
``plugins.modules`` names the plugin modules (in production kith's own entry points do), the
host's access policy reads their sections, /link joins them to Telegram, and the outbox reaches them.

Nothing of kith's is replaced: Telegram runs against its Bot API fake, Matrix against the homeserver
fake through mautrix, Slack against the Slack fake through slack-sdk (Socket Mode), Signal against
the signal-cli daemon fake, WhatsApp against the Graph API fake with webhooks signed as Meta signs them.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mautrix")
pytest.importorskip("slack_sdk")

from gateway.app import Gateway
from gateway.configread import parse_config
from gateway.schedule.engine import sync_user
from gateway.state.delivery import DeliveryPrefs
from tests.channels.rig import FAST, TG_TOKEN, channel_plugins, wait_for
from tests.fakes.anthropic import API_KEY, FakeAnthropic
from tests.fakes.matrix_hs import BOT, FakeHomeserver
from tests.fakes.signal_cli import BOT_NUMBER, FakeSignalCli
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.fakes.whatsapp_graph import FakeGraph
from tests.storage import select_rows

MX_TOKEN = "syt_e2e_token"
SL_BOT, SL_APP = "xoxb-e2e", "xapp-e2e"  # WA_TOKEN is SL_BOT with EAAG for xoxb (the doctor test)
ADA_TG = 1001
ADA_MX, ADA_MX_DM = "@ada:fake.test", "!ada-dm:fake.test"
ADA_SL, ADA_SL_DM = "UADA", "DADA"
ADA_SG = "2b3c4d5e-0000-4000-8000-00000000ada0"
ADA_WA = "4915112345678"
WA_TOKEN, WA_SECRET = SL_BOT.replace("xoxb", "EAAG"), "e2e-app-secret-0123456789"
MODULES = ["adapters.matrix_config", "adapters.slack_config", "adapters.signal_config", "adapters.whatsapp_config"]


@dataclass
class Trio:
    gw: Gateway
    tg: FakeTelegram
    mx: FakeHomeserver
    sl: FakeSlack
    sg: FakeSignalCli
    wa: FakeGraph

    async def tg_say(self, text: str, user_id: int = ADA_TG) -> None:
        await self.tg.push(self.tg.make_update(user_id=user_id, text=text))

    async def mx_say(self, text: str, *, room: str = ADA_MX_DM, sender: str = ADA_MX, **content: Any) -> str:
        return await self.mx.say(room, sender, text, **content)

    async def sl_say(self, text: str, *, user: str = ADA_SL, channel: str = ADA_SL_DM, **extra: Any) -> None:
        kind = "im" if channel.startswith("D") else "channel"
        await self.sl.push_event(self.sl.message(user=user, channel=channel, text=text, channel_type=kind, **extra))

    async def sg_say(self, text: str, *, uuid: str = ADA_SG, **kw: Any) -> int:
        return await self.sg.say(text, uuid=uuid, **kw)

    async def wa_say(self, text: str, *, sender: str = ADA_WA) -> None:
        await self.wa_send(self.wa.text(sender, text))

    async def wa_send(self, message: dict[str, Any]) -> None:
        """``message`` (the fake's ``text``/``image``) to the webhook, signed as Meta signs it."""
        import aiohttp

        body = json.dumps(self.wa.event(message)).encode()
        async with aiohttp.ClientSession() as http:
            status = await self.wa.post(http, f"http://127.0.0.1:{self.gw.port}/whatsapp/webhook", body,
                                        secret=WA_SECRET)  # fmt: skip
        assert status == 200


@pytest.fixture
async def trio_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Trio]]]:
    started: list[tuple[Gateway, list[Any]]] = []

    async def start(*, llm: dict[str, Any] | None = None, access: dict[str, Any] | None = None,
                    matrix: dict[str, Any] | None = None, slack: dict[str, Any] | None = None) -> Trio:  # fmt: skip
        tg, mx, sl = FakeTelegram(token=TG_TOKEN), FakeHomeserver(token=MX_TOKEN), FakeSlack(SL_BOT, SL_APP)
        sg, wa = FakeSignalCli(), FakeGraph(token=WA_TOKEN)
        for fake in (tg, mx, sl, sg, wa):
            await fake.start()
        await mx.direct({ADA_MX: [ADA_MX_DM]})
        allow = access if access is not None else {"dm_policy": "allowlist"}
        data = {
            "data_dir": str(tmp_path / "data"), "llm": llm or {"provider": "echo"}, "server": {"port": 0},
            "plugins": {"entry_points": False, "modules": MODULES},
            "channels": {
                "telegram": {"enabled": True, "token": TG_TOKEN, "base_url": tg.base_url, "poll_timeout_s": 1,
                             "allow_from": [str(ADA_TG)], **FAST, **allow},
                "matrix": {"enabled": True, "homeserver": mx.base_url, "access_token": MX_TOKEN, "sync_timeout_s": 1,
                           "allow_from": [ADA_MX], **FAST, **allow, **(matrix or {})},
                "slack": {"enabled": True, "bot_token": SL_BOT, "app_token": SL_APP, "api_base": sl.api_base,
                          "allow_from": [ADA_SL], **FAST, **allow, **(slack or {})},
                "signal": {"enabled": True, "daemon_url": sg.base_url, "account": BOT_NUMBER, "allow_from": [ADA_SG],
                           **FAST, **allow},
                "whatsapp": {"enabled": True, "access_token": WA_TOKEN, "phone_number_id": wa.phone_number_id,
                             "app_secret": WA_SECRET, "verify_token": "v", "graph_base": wa.graph_base,
                             "allow_from": [ADA_WA], **FAST, **allow},
            },
        }  # fmt: skip
        gw = Gateway(parse_config(data, env={}), plugins=channel_plugins(), entry_points=False)
        gw.supervisor.watchdog_interval = 0.2
        gw.supervisor.base_delay = 0.1  # tests wait for restarts, not for production backoff
        gw.supervisor.max_delay = 0.5
        started.append((gw, [tg, mx, sl, sg, wa]))
        await gw.__aenter__()
        await wait_for(lambda: all(gw.supervisor.health()[n]["state"] == "running"
                                   for n in ("telegram", "matrix", "slack", "signal", "whatsapp")),
                       what="adapters running")  # fmt: skip
        await asyncio.wait_for(gw.adapters["telegram"].ready.wait(), 10)  # type: ignore[attr-defined]
        return Trio(gw=gw, tg=tg, mx=mx, sl=sl, sg=sg, wa=wa)

    yield start
    for gw, fakes in started:
        await gw.close()
        for fake in fakes:
            await fake.close()


async def test_dms_round_trip_and_the_plugins_are_kiths_own(trio_factory) -> None:  # type: ignore[no-untyped-def]
    t: Trio = await trio_factory()
    await t.mx_say("hello from matrix")
    await t.sl_say("hello from slack")
    await t.sg_say("hello from signal")
    (mx,) = await t.mx.wait_sent(1)
    (sl,) = await t.sl.wait_posted(1)
    (sg,) = await t.sg.wait_sent(1)
    assert sg["recipient"] == [ADA_SG] and sg["message"].startswith("echo: hello from signal")
    assert mx["room"] == ADA_MX_DM and mx["content"]["body"].startswith("echo: hello from matrix")
    assert sl["channel"] == ADA_SL_DM and sl["text"].startswith("echo: hello from slack")
    assert t.gw.registrations.channels.plugin_of("matrix") == "adapters.matrix_config"
    assert t.gw.registrations.channels.plugin_of("slack") == "adapters.slack_config"
    assert t.gw.registrations.channels.plugin_of("signal") == "adapters.signal_config"
    health = t.gw.supervisor.health()
    assert health["matrix"]["state"] == health["slack"]["state"] == health["signal"]["state"] == "running"


async def test_strangers_get_a_pairing_code_and_groups_need_allowlist_and_mention(trio_factory) -> None:  # type: ignore[no-untyped-def]
    t: Trio = await trio_factory(access={"dm_policy": "pairing"}, matrix={"group_allow": ["!team:fake.test"]},
                                 slack={"group_allow": ["CTEAM"]})
    await t.mx.invite("!eve-dm:fake.test", "@eve:fake.test", is_direct=True)
    await wait_for(lambda: "!eve-dm:fake.test" in t.mx.joined, what="the invite joined")
    await t.mx_say("hi, who are you?", room="!eve-dm:fake.test", sender="@eve:fake.test")
    await t.sl_say("hi there", user="UEVE", channel="DEVE")
    await t.sg_say("hello?", uuid="eve-uuid")
    await t.wa_say("hello, is this kith?", sender="4917600000999")
    (mx_code,) = await t.mx.wait_sent(1)
    (sl_code,) = await t.sl.wait_posted(1)
    (sg_code,) = await t.sg.wait_sent(1)
    (wa_code,) = await t.wa.wait_sent(1)
    assert wa_code["to"] == "4917600000999"
    for said in (mx_code["content"]["body"], sl_code["text"], sg_code["message"], wa_code["text"]["body"]):
        assert re.search(r"\b[A-Z2-9]{8}\b", said), said  # the pairing code, and nothing else happened
    assert select_rows(t.gw.state, "SELECT COUNT(*) FROM turns")[0][0] == 0
    # Groups: only allowed rooms, only when addressed (the gating is the host's, the flags the adapters').
    await t.mx_say("chatter", room="!team:fake.test")
    await t.mx_say("kith, a question", room="!team:fake.test", **{"m.mentions": {"user_ids": [BOT]}})
    await t.mx_say("kith, elsewhere", room="!other:fake.test", **{"m.mentions": {"user_ids": [BOT]}})
    await t.sl_say("chatter", channel="CTEAM")
    await t.sl_say(f"<@{BOT_USER}> a question", channel="CTEAM")
    await t.sl_say(f"<@{BOT_USER}> elsewhere", channel="COTHER")
    sent = await t.mx.wait_sent(2)
    posted = await t.sl.wait_posted(2)
    await asyncio.sleep(0.5)  # the refused ones had time to be (wrongly) answered
    assert len(t.mx.sent) == 2 and len(t.sl.posted) == 2
    assert "a question" in sent[1]["content"]["body"] and "m.in_reply_to" in sent[1]["content"]["m.relates_to"]
    assert "a question" in posted[1]["text"] and posted[1]["thread_ts"]
    keys = {r[0] for r in select_rows(t.gw.state, "SELECT conversation_key FROM turns")}
    assert keys == {"matrix:!team:fake.test", "slack:CTEAM"}


def _confirm(text: str) -> str:
    found = re.search(r"/link confirm ([A-Z0-9]{4})\b", text)
    assert found, text
    return f"/link confirm {found.group(1)}"


async def test_one_person_on_telegram_matrix_slack_signal_and_whatsapp_has_one_memory(trio_factory) -> None:  # type: ignore[no-untyped-def]
    fake = await FakeAnthropic().start()
    try:
        t: Trio = await trio_factory(llm={"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url,
                                          "max_retries": 0})  # fmt: skip

        async def mx_said(n: int) -> str:
            return str((await t.mx.wait_sent(n))[n - 1]["content"]["body"])

        async def sl_said(n: int) -> str:
            return str((await t.sl.wait_posted(n))[n - 1]["text"])

        async def sg_said(n: int) -> str:
            return str((await t.sg.wait_sent(n))[n - 1]["message"])

        async def sg_link(text: str) -> None:
            await t.sg_say(text)

        async def wa_said(n: int) -> str:
            return str((await t.wa.wait_sent(n))[n - 1]["text"]["body"])

        async def sl_link(text: str) -> None:
            # Slack keeps "/link" for itself: the person types "/kith link ..." (the app's slash command).
            await t.sl.push_command(user=ADA_SL, text=text.removeprefix("/"))

        for redeem, said in ((t.mx_say, mx_said), (sl_link, sl_said), (sg_link, sg_said), (t.wa_say, wa_said)):
            n = len(t.tg.sent)
            await t.tg_say("/link")
            sent = await t.tg.wait_sent(n + 1)
            found = re.search(r"link code is ([A-Z0-9-]+)", sent[-1].text)
            assert found, sent[-1].text
            await redeem(f"/link {found.group(1).rstrip('.')}")
            asked = await said(1)
            told = (await t.tg.wait_sent(n + 2))[-1].text
            await t.tg_say(_confirm(told))
            await t.tg.wait_sent(n + 3)
            await redeem(_confirm(asked))
            assert "Linked" in await said(2)
            await t.tg.wait_sent(n + 4)
        assert len({r[0] for r in select_rows(t.gw.state, "SELECT user_id FROM identities")}) == 1

        await t.mx_say("Remember this: my cat is called Miso.")
        await t.mx.wait_sent(3)
        await t.sl_say("What is my cat called?")
        await t.sl.wait_posted(3)
        assert "Miso" in json.dumps(fake.last_turn())  # told on Matrix, asked on Slack
        await t.sg_say("And what did I ask on Slack?")
        await t.sg.wait_sent(3)
        assert "What is my cat called?" in json.dumps(fake.last_turn())
        await t.wa_say("What is my cat's name, once more?")
        await t.wa.wait_sent(3)
        assert "Miso" in json.dumps(fake.last_turn())  # the same memory on WhatsApp
        assert len({r[0] for r in select_rows(t.gw.state, "SELECT DISTINCT user_id FROM turns")}) == 1
    finally:
        await fake.stop()


async def _remind(gw: Gateway, uid: str, rid: str, text: str, seconds: float) -> None:
    due = (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0)
    store = gw.memory_store(uid)
    old = store.read("REMINDERS.md") if store.exists("REMINDERS.md") else "# Reminders\n\n"
    line = (f"- [ ] {due:%Y-%m-%d %H:%M} (UTC) {text} <!-- reminder id={rid} to=websocket:ada-tab "
            f"due={due:%Y-%m-%dT%H:%M:%SZ} -->\n")
    store.write("REMINDERS.md", old + line, source="test")
    await sync_user(gw, uid, ("REMINDERS.md",))


async def test_a_reminder_reaches_each_preferred_new_channel(trio_factory) -> None:  # type: ignore[no-untyped-def]
    t: Trio = await trio_factory()
    await t.tg_say("hello")
    await t.tg.wait_sent(1)
    ada = t.gw.identities.lookup("telegram", str(ADA_TG))
    assert ada is not None
    with t.gw.state.tx():  # her other accounts, linked (as /link would), and a web chat set the reminders
        for channel, account in (("matrix", ADA_MX), ("slack", ADA_SL), ("signal", ADA_SG), ("whatsapp", ADA_WA),
                                 ("websocket", "ada-tab")):
            t.gw.state.identities.add(channel, account, ada, source="test")
    await t.mx_say("hi from matrix")  # her one-to-one conversations there, most recent first
    await t.sl_say("hi from slack")
    await t.sg_say("hi from signal")
    await t.wa_say("hi from whatsapp")  # within the 24-hour window from now on
    await t.wa.wait_sent(1)
    await t.mx.wait_sent(1)
    await t.sl.wait_posted(1)
    await t.sg.wait_sent(1)
    outbox = t.gw.state.outbox
    outbox.set_prefs(ada, DeliveryPrefs(preferred_channel="matrix"))
    await _remind(t.gw, ada, "r0b01", "water the plants", 1)  # the tab is closed: the origin cannot take it
    sent = await t.mx.wait_sent(2, timeout=20)
    assert sent[-1]["room"] == ADA_MX_DM and "water the plants" in sent[-1]["content"]["body"]
    outbox.set_prefs(ada, DeliveryPrefs(preferred_channel="slack"))
    await _remind(t.gw, ada, "r0b02", "call Sam", 1)
    posted = await t.sl.wait_posted(2, timeout=20)
    assert posted[-1]["channel"] == ADA_SL_DM and "call Sam" in posted[-1]["text"]
    outbox.set_prefs(ada, DeliveryPrefs(preferred_channel="signal"))
    await _remind(t.gw, ada, "r0b03", "feed the cat", 1)
    signalled = await t.sg.wait_sent(2, timeout=20)
    assert signalled[-1]["recipient"] == [ADA_SG] and "feed the cat" in signalled[-1]["message"]
    outbox.set_prefs(ada, DeliveryPrefs(preferred_channel="whatsapp"))
    await _remind(t.gw, ada, "r0b04", "take the bins out", 1)
    whatsapped = await t.wa.wait_sent(2, timeout=20)
    assert whatsapped[-1]["to"] == ADA_WA and "take the bins out" in whatsapped[-1]["text"]["body"]
    await wait_for(lambda: {e.channel for e in outbox.list_for(ada)} == {"matrix", "slack", "signal", "whatsapp"},
                   20, "recorded")
    assert len(t.tg.sent) == 1  # Telegram, neither preferred nor the origin, got neither


async def test_kith_doctor_checks_each_channels_credentials(tmp_path: Path) -> None:
    from gateway.ops.doctor import check_channels

    async with FakeHomeserver(token=MX_TOKEN) as mx, FakeSlack(SL_BOT, SL_APP) as sl, FakeSignalCli() as sg, \
            FakeGraph(token=WA_TOKEN) as wa:  # fmt: skip
        def config(mx_token: str, sl_token: str, daemon: str) -> Any:
            return parse_config({"data_dir": str(tmp_path), "plugins": {"entry_points": False, "modules": MODULES},
                "channels": {
                "matrix": {"enabled": True, "homeserver": mx.base_url, "access_token": mx_token},
                "slack": {"enabled": True, "bot_token": sl_token, "app_token": SL_APP, "api_base": sl.api_base},
                "signal": {"enabled": True, "daemon_url": daemon, "account": BOT_NUMBER},
                "whatsapp": {"enabled": True, "access_token": sl_token.replace("xoxb", "EAAG"),
                             "phone_number_id": wa.phone_number_id, "app_secret": "s", "verify_token": "v",
                             "graph_base": wa.graph_base}}},
                env={})  # fmt: skip

        good = {c.name: (c.status, c.detail) for c in await check_channels(config(MX_TOKEN, SL_BOT, sg.base_url))}
        assert good["channel matrix"] == ("ok", f"signed in to {mx.base_url} as {BOT}")
        assert good["channel slack"] == ("ok", "bot kith in workspace kith-test (socket mode)")
        assert good["channel signal"] == ("ok", f"signal-cli daemon at {sg.base_url} answers (account {BOT_NUMBER})")
        assert good["channel whatsapp"] == ("ok", "number +1 555-000-1111 (kith test)")
        gone = mx.base_url + "/gone"  # this fake's server, a path it does not serve
        bad = {c.name: (c.status, c.detail) for c in await check_channels(config("wrong", "xoxb-wrong", gone))}
        assert bad["channel matrix"][0] == "fail" and "refused the access token" in bad["channel matrix"][1]
        assert bad["channel slack"] == ("fail", "auth.test refused the bot token: invalid_auth")
        assert bad["channel signal"] == ("fail", f"signal-cli daemon at {gone} answered HTTP 404 to /api/v1/check")
        assert bad["channel whatsapp"][0] == "fail" and "Invalid OAuth access token" in bad["channel whatsapp"][1]


async def test_files_in_reach_the_model_through_the_media_pipeline(trio_factory) -> None:  # type: ignore[no-untyped-def]
    from tests.channels.test_media_e2e import jpeg, last_user_content, pdf_with

    fake = await FakeAnthropic().start()
    try:
        t: Trio = await trio_factory(llm={"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url,
                                          "max_retries": 0})  # fmt: skip
        photo = jpeg()
        mxc = t.mx.add_media(photo, "image/jpeg")
        await t.mx_say("photo.jpg", msgtype="m.image", url=mxc, info={"mimetype": "image/jpeg", "size": len(photo)})
        await t.mx.wait_sent(1)
        images = [b for b in last_user_content(fake) if b["type"] == "image"]
        assert len(images) == 1 and t.mx.downloads == [mxc.rsplit("/", 1)[1]]

        doc = pdf_with("The meeting moved to Thursday at the Periwinkle room.")
        item = t.sl.add_file(doc, name="agenda.pdf", mimetype="application/pdf")
        await t.sl_say("what changed?", subtype="file_share", files=[item])
        await t.sl.wait_posted(1)
        assert "Periwinkle" in json.dumps(last_user_content(fake)) and t.sl.downloads == [item["id"]]

        doc = pdf_with("Bring the blue folder to the Marigold desk.")
        att = t.sg.add_file(doc, filename="note.pdf", content_type="application/pdf")
        await t.sg_say("read this", attachments=[att])
        await t.sg.wait_sent(1)
        assert "Marigold" in json.dumps(last_user_content(fake))
        assert [f["id"] for f in t.sg.fetched] == [att["id"]]

        photo = jpeg()
        media_id = t.wa.add_media(photo, "image/jpeg")
        await t.wa_send(t.wa.image(ADA_WA, media_id, caption="my cat"))
        await t.wa.wait_sent(1)
        content = last_user_content(fake)
        assert [b["type"] for b in content].count("image") == 1 and "my cat" in json.dumps(content)
        assert t.wa.downloads == [media_id]
    finally:
        await fake.stop()


async def test_supervision_restarts_matrix_and_signal_and_a_revoked_token_stops_matrix_alone(
    trio_factory,  # type: ignore[no-untyped-def]
) -> None:
    t: Trio = await trio_factory(matrix={"stall_after_s": 1.5})

    def health(name: str) -> dict[str, Any]:
        return t.gw.supervisor.health()[name]

    t.mx.failing_syncs = 3  # the homeserver answers 502: the loop fails, the supervisor backs off and restarts
    await wait_for(lambda: health("matrix")["restarts"] >= 1, 20, "a restart after the 502s")
    await t.mx_say("back?")
    await t.mx.wait_sent(1, timeout=20)
    assert health("matrix")["state"] == "running"

    before = health("matrix")["restarts"]
    t.mx.stalled = True  # the long poll never comes back: the watchdog sees no /sync answer
    await wait_for(lambda: health("matrix")["restarts"] > before, 20, "a watchdog restart")
    assert "no activity" in health("matrix")["last_error"]
    t.mx.stalled = False
    await t.mx_say("and now?")
    await t.mx.wait_sent(2, timeout=20)

    streams = t.sg.streams
    t.sg.drop()  # signal-cli restarted: the event stream ends, the supervisor opens a new one
    await wait_for(lambda: t.sg.streams > streams and health("signal")["state"] == "running", 20, "signal back")
    assert health("signal")["restarts"] >= 1
    await t.sg_say("signal back?")
    await t.sg.wait_sent(1)

    t.mx.revoke()
    await wait_for(lambda: health("matrix")["state"] == "failed", 20, "matrix stopped")
    assert "access token" in health("matrix")["last_error"]
    await t.sl_say("slack still here?")
    await t.sl.wait_posted(1)
    await asyncio.sleep(0.5)
    assert health("matrix")["state"] == "failed" and health("slack")["state"] == "running"


async def test_supervision_restarts_slack_when_its_socket_mode_connection_stays_down(
    trio_factory,  # type: ignore[no-untyped-def]
) -> None:
    t: Trio = await trio_factory(slack={"stall_after_s": 1.5})

    def slack() -> dict[str, Any]:
        return t.gw.supervisor.health()["slack"]

    connections = t.sl.connections
    t.sl.refuse_sockets = True
    await t.sl.drop()  # cut from Slack's side, and the SDK's own reconnects are refused: no ping-pong
    await wait_for(lambda: slack()["restarts"] >= 1, 20, "a watchdog restart")
    assert "no activity" in slack()["last_error"]
    t.sl.refuse_sockets = False  # the restarted run (after backoff) opens a new connection
    await wait_for(lambda: t.sl.connections > connections and slack()["state"] == "running", 20, "slack back")
    await t.sl_say("slack back?")
    (posted,) = await t.sl.wait_posted(1, timeout=20)
    assert posted["text"].startswith("echo: slack back?")


async def test_slack_events_api_through_the_hosts_http_server(trio_factory) -> None:  # type: ignore[no-untyped-def]
    import aiohttp

    secret = "e2e-signing-secret-0123456789"
    t: Trio = await trio_factory(slack={"mode": "events", "signing_secret": secret})
    url = f"http://127.0.0.1:{t.gw.port}/slack/events"
    async with aiohttp.ClientSession() as http:
        body = json.dumps(t.sl.message(user=ADA_SL, channel=ADA_SL_DM, text="over the events api")).encode()
        assert (await t.sl.signed_post(http, url, body, secret="forged")).status == 401
        assert (await t.sl.signed_post(http, url, body, secret=secret)).status == 200
        # Slash commands come form-encoded: the path is the section's webhook, exempt from the JSON-only rule.
        form = t.sl.command_form(user=ADA_SL, text="help")
        resp = await t.sl.signed_post(http, url, form, secret=secret,
                                      content_type="application/x-www-form-urlencoded")
        assert resp.status == 200
    posted = await t.sl.wait_posted(2)
    assert any("over the events api" in p["text"] for p in posted)
    assert any("/link" in p["text"] and p["channel"] == f"D{ADA_SL}" for p in posted)  # the help, in the DM
    slack_turns = select_rows(t.gw.state, "SELECT COUNT(*) FROM turns WHERE channel='slack' AND role='user'")
    assert slack_turns[0][0] == 1  # /help is no turn
