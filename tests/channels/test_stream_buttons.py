"""Confirmation buttons through the real gateway: a ``/link`` confirmed by pressing "Confirm link"
on Telegram (inline keyboard, PTB against the fake Bot API) and on Discord (a component, discord.py
against the fake gateway), while a press by anyone else changes nothing. Typed commands still work."""

from __future__ import annotations

import re
from pathlib import Path

from tests.channels.rig import ADA_DC, ADA_TG, start_rig, wait_for


def _code(text: str) -> str:
    found = re.search(r"link code is ([A-Z0-9-]+)", text)
    assert found, text
    return found.group(1).rstrip(".")


def _typed_confirm(text: str) -> str:
    found = re.search(r"/link confirm ([A-Z0-9]{4})\b", text)
    assert found, text
    return f"/link confirm {found.group(1)}"


async def test_telegram_confirm_button_completes_a_link_and_a_stranger_changes_nothing(tmp_path: Path) -> None:
    rig = await start_rig(tmp_path)
    try:
        links = rig.gw.identities.links
        await rig.tg_say("/link")
        code = _code((await rig.tg.wait_sent(1))[0].text)
        assert rig.tg.sent[0].buttons() == {}  # nothing to confirm yet: no keyboard
        await rig.nc_say(f"/link {code}")
        asked_nc = (await rig.nc.wait_posts(1))[0].message
        told = (await rig.tg.wait_sent(2))[1]  # the Telegram side is asked in its own chat, with buttons
        buttons = told.buttons()
        assert list(buttons) == ["Confirm link", "Cancel"], told
        assert all(len(data.encode()) <= 64 for data in buttons.values())  # Telegram's callback_data limit
        assert _typed_confirm(told.text).split()[-1] not in "".join(buttons.values())  # no secret in the data

        # Another account presses "Confirm link" (a forwarded message, a shared screen): refused, no effect.
        await rig.tg.push(rig.tg.make_callback(user_id=ADA_TG + 1, message=told, data=buttons["Confirm link"]))
        await wait_for(lambda: len(rig.tg.answered) == 1, what="the stranger's press answered")
        assert rig.tg.answered[0].get("text") == "This button is not for you."
        ((request, side),) = links.involving("telegram", str(ADA_TG))
        assert not request.party(side).confirmed and len(rig.tg.sent) == 2

        # Ada presses it: her side is confirmed, the keyboard goes away.
        await rig.tg.push(rig.tg.make_callback(user_id=ADA_TG, message=told, data=buttons["Confirm link"]))
        confirmed = (await rig.tg.wait_sent(3))[2]
        assert confirmed.text.startswith("Confirmed here"), confirmed.text
        assert (ADA_TG, told.message_id) in rig.tg.markup_removed

        # A used button changes nothing either (a double tap, a second device).
        await rig.tg.push(rig.tg.make_callback(user_id=ADA_TG, message=told, data=buttons["Cancel"]))
        await wait_for(lambda: len(rig.tg.answered) == 3, what="the second press answered")
        assert "expired" in rig.tg.answered[2].get("text", "")

        # The Nextcloud side confirms by typing, as before: linked.
        await rig.nc_say(_typed_confirm(asked_nc))
        assert "Linked" in (await rig.nc.wait_posts(2))[1].message
        assert len({r["user_id"] for r in rig.select_rows("SELECT user_id FROM identities")}) == 1
    finally:
        await rig.stop()



async def test_discord_components_confirm_a_link_and_a_stranger_changes_nothing(tmp_path: Path) -> None:
    rig = await start_rig(tmp_path)
    try:
        links = rig.gw.identities.links
        await rig.tg_say("/link")
        code = _code((await rig.tg.wait_sent(1))[0].text)
        await rig.dc_say(f"/link {code}")
        asked = (await rig.dc.wait_created(1))[0]  # the turn's answer on Discord, with buttons
        assert list(asked.buttons()) == ["Confirm link", "Cancel"], asked
        told_tg = (await rig.tg.wait_sent(2))[1]
        assert list(told_tg.buttons()) == ["Confirm link", "Cancel"]

        stranger = await rig.dc.press(user_id=ADA_DC + 7, message=asked, custom_id=asked.buttons()["Confirm link"])
        await wait_for(lambda: len(rig.dc.interaction_responses) == 1, what="the stranger's press answered")
        answer = rig.dc.interaction_responses[0]
        assert answer["id"] == stranger and answer["type"] == 4  # a message only the presser sees
        assert answer["data"]["content"] == "This button is not for you." and answer["data"]["flags"] == 64
        ((request, side),) = links.involving("discord", str(ADA_DC))
        assert not request.party(side).confirmed and len(rig.dc.created) == 1

        await rig.dc.press(user_id=ADA_DC, message=asked, custom_id=asked.buttons()["Confirm link"])
        confirmed = (await rig.dc.wait_created(2))[1]
        assert confirmed.content.startswith("Confirmed here"), confirmed.content
        assert rig.dc.interaction_responses[1]["type"] == 7  # the message updated: its buttons removed
        assert rig.dc.interaction_responses[1]["data"]["components"] == []

        # Telegram confirms with its own button: linked on both sides.
        await rig.tg.push(rig.tg.make_callback(user_id=ADA_TG, message=told_tg, data=told_tg.buttons()["Confirm link"]))
        assert "Linked" in (await rig.tg.wait_sent(3))[2].text
        assert "Linked" in (await rig.dc.wait_created(3))[2].content
        assert len({r["user_id"] for r in rig.select_rows("SELECT user_id FROM identities")}) == 1
    finally:
        await rig.stop()


async def test_telegram_forget_buttons_send_the_command_as_the_person(tmp_path: Path) -> None:
    """Adapter level (stub host): the keyboard under a /forget confirmation, a press turned into the
    person's "/forget confirm", the other button of the message used up with it."""
    import asyncio

    from adapters.telegram import TelegramAdapter
    from tests.channels.stream_stub import StreamingStub
    from tests.channels.stub import StubGateway
    from tests.fakes.telegram_api import FakeTelegram

    token = "123456:TEST-token"
    async with FakeTelegram(token=token) as fake:
        cfg = {"enabled": True, "token": token, "base_url": fake.base_url, "poll_timeout_s": 1,
               "send_rate_per_s": 1000, "send_burst": 1000, "parse_mode": "plain"}
        async with StreamingStub(StubGateway.with_channels(tmp_path, telegram=cfg).config) as gw:
            adapter = TelegramAdapter(gw)  # type: ignore[arg-type]
            gw.start(adapter)
            await asyncio.wait_for(adapter.ready.wait(), 10)
            gw.final, gw.notice = ("This would forget 3 lines:\n- USER.md:4: locker code 1234\n"
                                   "Reply /forget confirm to remove exactly this, or /forget cancel."), True
            await fake.push(fake.make_update(user_id=42, text="/forget locker"))
            asked = (await fake.wait_sent(1))[0]
            buttons = asked.buttons()
            assert list(buttons) == ["Forget it", "Keep it"]
            gw.final = "Forgotten."
            await fake.push(fake.make_callback(user_id=43, message=asked, data=buttons["Forget it"]))
            await fake.push(fake.make_callback(user_id=42, message=asked, data=buttons["Forget it"]))
            await fake.wait_sent(2)
            assert [m.text for m in gw.inbound] == ["/forget locker", "/forget confirm"]
            assert gw.inbound[1].account_id == "42" and gw.inbound[1].conversation_id == "42"
            await fake.push(fake.make_callback(user_id=42, message=asked, data=buttons["Keep it"]))
            await wait_for(lambda: len(fake.answered) == 3, what="three presses answered")
            # (PTB handles updates concurrently: the first two presses may be answered in either order)
            assert sorted(str(a.get("text")) for a in fake.answered) == [
                "None", "This button has expired; type the command instead.", "This button is not for you."]
            assert len(gw.inbound) == 2

# ------------------------------------------------------------------------------ the offers themselves


def test_only_host_notices_offer_buttons() -> None:
    from gateway.delivery.buttons import offered
    from gateway.types import Reply

    link = "... reply `/link confirm AB2C` here within 9 minutes. If you don't know that account, reply `/link cancel`."
    assert [b.command for b in offered(Reply(text=link, notice=True))] == ["/link confirm AB2C", "/link cancel"]
    forget = "This would forget 3 lines:\n- ...\nReply /forget confirm to remove exactly this, or /forget cancel."
    assert [b.label for b in offered(Reply(text=forget, notice=True))] == ["Forget it", "Keep it"]
    assert offered(Reply(text=link)) == ()  # the model quoting a command offers nothing
    assert offered(Reply(text="Linked.", notice=True)) == ()
    from gateway.turn.commands import BUILTIN_HELP
    from plugins.remember import HELP

    listing = "\n".join([*BUILTIN_HELP.values(), *HELP.values()])  # /help names the commands: no question
    assert "/link confirm CODE" in listing and "/forget confirm" in listing
    assert offered(Reply(text=listing, notice=True)) == ()


def test_the_host_questions_as_worded_today_offer_buttons() -> None:
    """The wording the buttons key on, taken from where the questions are written (a rewording that
    drops it fails here, not silently in a chat)."""
    from datetime import UTC, datetime, timedelta

    from gateway.delivery.buttons import offered
    from gateway.identity.link_command import prompt
    from gateway.identity.linking import LinkRequest, Party
    from gateway.memory.edit.forget import ForgetReport
    from gateway.types import Reply

    asking = ForgetReport("confirm", "f1", "locker", message="This would forget 3 lines:").describe()
    assert [b.command for b in offered(Reply(text=asking, notice=True))] == ["/forget confirm", "/forget cancel"]
    done = ForgetReport("removed", "f1", "locker", message="Forgotten.").describe()
    assert offered(Reply(text=done, notice=True)) == ()
    def party(channel: str, account_id: str, token: str) -> Party:
        return Party(user_id="u", channel=channel, account_id=account_id, conversation_id="c", name="ada",
                     token=token, confirmed=False)

    request = LinkRequest(code="7XK2", issuer=party("telegram", "1", "AB2C"), redeemer=party("discord", "2", "QW3E"),
                          expires_at=datetime.now(UTC) + timedelta(minutes=9))
    for side, token in (("issuer", "AB2C"), ("redeemer", "QW3E")):
        text = prompt(request, side)  # type: ignore[arg-type]
        assert [b.command for b in offered(Reply(text=text, notice=True))] == [f"/link confirm {token}", "/link cancel"]


def test_a_press_counts_once_for_its_person_in_its_conversation() -> None:
    from gateway.delivery.buttons import Button, ButtonOffers

    now = [0.0]
    offers = ButtonOffers(ttl_s=60, max_offers=4, clock=lambda: now[0])
    yes, no = offers.offer((Button("Yes", "/forget confirm"), Button("No", "/forget cancel")),
                           conversation_id="c1", account_id="a1")
    assert offers.press(yes.token, conversation_id="c1", account_id="a2").outcome == "not_yours"
    assert offers.press(yes.token, conversation_id="c2", account_id="a1").outcome == "not_yours"
    assert offers.press("kith:forged", conversation_id="c1", account_id="a1").outcome == "expired"
    pressed = offers.press(yes.token, conversation_id="c1", account_id="a1")
    assert pressed.outcome == "ok" and pressed.button == yes.button
    assert offers.press(no.token, conversation_id="c1", account_id="a1").outcome == "expired"  # used up together
    (dm,) = offers.offer((Button("Yes", "/link confirm X"),), conversation_id="dm", account_id=None)
    assert offers.press(dm.token, conversation_id="dm", account_id="whoever").outcome == "ok"
    (late,) = offers.offer((Button("Yes", "/x"),), conversation_id="c", account_id="a")
    now[0] = 61
    assert offers.press(late.token, conversation_id="c", account_id="a").outcome == "expired"
    for _ in range(10):
        offers.offer((Button("Yes", "/x"),), conversation_id="c", account_id="a")
    assert len(offers) == 4  # bounded: the oldest offers go first
