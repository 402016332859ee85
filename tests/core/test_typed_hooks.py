"""The typed face of the hooks (gateway/hooks.py), the turn's admission value, the per-gateway stash."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway import hookspecs
from gateway.hooks import Hooks
from gateway.hookspecs import hookimpl
from gateway.turn.protocol import Proceed, Stop, _admit
from gateway.turn.writefailures import write_failures
from gateway.types import AccessDecision, Drop, InboundMessage, LLMResponse, Reply, Stash, StashKey, Turn
from tests.conftest import make_config


def test_every_hook_has_one_typed_method() -> None:
    specs = [n for n, _ in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("gateway_")]
    methods = {n for n, _ in inspect.getmembers(Hooks, inspect.isfunction) if not n.startswith("_")}
    missing = [n for n in specs if n.removeprefix("gateway_") not in methods]
    assert not missing, f"hooks without a method on gateway.hooks.Hooks: {missing}"
    for name in specs:
        method = getattr(Hooks, name.removeprefix("gateway_"))
        assert "return" in inspect.get_annotations(method), f"Hooks.{method.__name__} has no return type"


def _turn(text: str, *, account: str = "me", trusted: bool = True, mid: str = "") -> Turn:
    msg = InboundMessage(channel="websocket", account_id=account, text=text, trusted=trusted, message_id=mid)
    return Turn(turn_id="t-" + text, message=msg, received_at=datetime.now(UTC))


class Door:
    __name__ = "door"

    @hookimpl
    def gateway_filter_inbound(self, message: InboundMessage) -> Drop | None:
        return Drop(reason="bot") if message.account_id == "bot" else None

    @hookimpl
    def gateway_check_access(self, message: InboundMessage) -> AccessDecision | Drop | None:
        if message.account_id == "asker":
            return Drop(reason="pairing", reply="ask the owner")
        return AccessDecision.ALLOW if message.account_id == "friend" else None


async def test_admission_says_go_on_or_stop_with_this_reply(make_gateway: Any) -> None:
    gw = await make_gateway(plugins=(Door(),))
    assert await _admit(gw, _turn("hi", mid="m1")) == Proceed()
    assert await _admit(gw, _turn("hi", mid="m1")) == Stop(), "a redelivery stops without a word"
    assert await _admit(gw, _turn("hi", account="bot")) == Stop()
    assert await _admit(gw, _turn("hi", account="stranger", trusted=False)) == Stop(), "deny by default"
    assert await _admit(gw, _turn("hi", account="friend", trusted=False)) == Proceed()
    asked = await _admit(gw, _turn("hi", account="asker", trusted=False))
    assert isinstance(asked, Stop) and asked.reply is not None and asked.reply.text == "ask the owner"


class Odd:
    """First hooks answering with the wrong type: no answer, as before the calls were typed."""

    __name__ = "odd"

    @hookimpl
    def gateway_render_reply(self, response: LLMResponse) -> Any:
        return "not a Reply"

    @hookimpl
    def gateway_before_tool_call(self) -> Any:
        return ""


async def test_a_first_hook_of_the_wrong_type_is_no_answer(make_gateway: Any) -> None:
    gw = await make_gateway(plugins=(Odd(),))
    turn = _turn("hello")
    assert await gw.hooks.render_reply(gw, turn, LLMResponse(text="x")) is None
    reply = await gw.handle_inbound(turn.message)
    assert isinstance(reply, Reply) and reply.chunks  # the default renderer answered


async def test_each_gateway_has_its_own_stash(make_gateway: Any, tmp_path: Path) -> None:
    one = await make_gateway(config=make_config(tmp_path / "one"))
    two = await make_gateway(config=make_config(tmp_path / "two"))
    assert write_failures(one.stash) is write_failures(one.stash)
    assert write_failures(one.stash) is not write_failures(two.stash)


def test_stash_keys_are_typed_and_distinct() -> None:
    a: StashKey[list[int]] = StashKey()
    b: StashKey[list[int]] = StashKey()
    stash = Stash()
    assert stash.setdefault(a, [1]) == [1] and stash.setdefault(a, [2]) == [1]
    assert b not in stash and stash.get(b) is None
    assert stash.pop(a) == [1] and a not in stash and stash.pop(a) is None
