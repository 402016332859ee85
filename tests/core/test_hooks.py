"""Every hook the host calls, exercised through a real Gateway; plus meta-tests that keep hookspecs,
tests and docs/hooks.md in step."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import pluggy
import pytest

from gateway import hookspecs
from gateway.adapter import Adapter
from gateway.app import Gateway
from gateway.config import Config, ConfigError
from gateway.hookspecs import hookimpl
from gateway.llm.base import LLMError
from gateway.registrations import collect_registrations
from gateway.testing import test_config
from gateway.types import (
    AccessDecision,
    Drop,
    InboundMessage,
    LLMRequest,
    LLMResponse,
    Reply,
    Session,
    Turn,
    UserRef,
)
from tests.conftest import make_config
from tests.storage import select_one, select_rows

ROOT = Path(__file__).resolve().parents[2]


def untrusted(text: str, account: str = "stranger", **kw: Any) -> InboundMessage:
    return InboundMessage(channel="testchan", account_id=account, text=text, message_id=kw.pop("mid", ""), **kw)


def trusted(text: str, account: str = "me", **kw: Any) -> InboundMessage:
    return InboundMessage(channel="websocket", account_id=account, text=text, trusted=True, **kw)


class Recorder:
    __name__ = "recorder"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.sessions: list[Session] = []
        self.errors: list[BaseException] = []
        self.merges: list[tuple[str, str]] = []
        self.config: Config | None = None

    @hookimpl
    def gateway_addhooks(self, pluginmanager: pluggy.PluginManager) -> None:
        self.calls.append("addhooks")

    @hookimpl
    def gateway_configure(self, config: Config) -> None:
        self.config = config

    @hookimpl
    async def gateway_startup(self, gateway: Gateway) -> None:
        self.calls.append("startup")

    @hookimpl
    async def gateway_shutdown(self, gateway: Gateway) -> None:
        self.calls.append("shutdown")

    @hookimpl
    def gateway_session_started(self, session: Session) -> None:
        self.sessions.append(session)

    @hookimpl
    def gateway_turn_error(self, error: BaseException) -> None:
        self.errors.append(error)

    @hookimpl
    def gateway_before_users_merge(self, into: str, source: str) -> None:
        self.calls.append("before_merge")

    @hookimpl
    def gateway_users_merged(self, into: str, source: str) -> None:
        self.merges.append((into, source))

    @hookimpl
    def gateway_after_turn(self, turn: Turn, reply: Reply) -> None:
        self.calls.append(f"after:{turn.message.text}")


async def test_lifecycle_session_and_merge_hooks(tmp_path: Path) -> None:
    rec = Recorder()
    cfg = make_config(tmp_path)
    async with Gateway(cfg, plugins=(rec,), entry_points=False) as gw:
        assert rec.config is cfg and rec.calls[:2] == ["addhooks", "startup"]
        await gw.handle_inbound(trusted("one"))
        await gw.handle_inbound(trusted("two"))
        assert len(rec.sessions) == 1 and rec.sessions[0].is_new
        await gw.handle_inbound(trusted("/new"))
        await gw.handle_inbound(trusted("three"))
        assert len(rec.sessions) == 2
        await gw.handle_inbound(trusted("/otr on"))
        await gw.handle_inbound(trusted("hidden"))
        assert "after:hidden" not in rec.calls and "after:three" in rec.calls, "no after_turn for OTR turns"
        code = (await gw.handle_inbound(trusted("/link"))).text.split("code is ")[1][:8]  # type: ignore[union-attr]
        await gw.handle_inbound(trusted("hi", account="other"))
        asked = (await gw.handle_inbound(trusted(f"/link {code}", account="other"))).text  # type: ignore[union-attr]
        shown = (await gw.handle_inbound(trusted("/link"))).text  # type: ignore[union-attr]
        for account, text in (("me", shown), ("other", asked)):  # both accounts confirm (issue 12)
            token = re.search(r"/link confirm ([A-Z0-9]+)", text).group(1)  # type: ignore[union-attr]
            await gw.handle_inbound(trusted(f"/link confirm {token}", account=account))
        assert "before_merge" in rec.calls and len(rec.merges) == 1
    assert rec.calls[-1] == "shutdown"


class Gatekeeper:
    __name__ = "gatekeeper"

    @hookimpl
    def gateway_filter_inbound(self, message: InboundMessage) -> Drop | None:
        return Drop(reason="bot") if message.account_id.startswith("bot-") else None

    @hookimpl
    def gateway_check_access(self, message: InboundMessage) -> AccessDecision | Drop | None:
        if message.account_id == "friend":
            return AccessDecision.ALLOW
        if message.account_id == "asker":
            return Drop(reason="pairing", reply="ask the owner for access")
        return None


async def test_filter_and_access_deny_by_default(make_gateway: Any) -> None:
    gw = await make_gateway(plugins=(Gatekeeper(),))
    assert await gw.handle_inbound(untrusted("hi", account="stranger")) is None
    assert await gw.handle_inbound(untrusted("hi", account="bot-7")) is None
    asked = await gw.handle_inbound(untrusted("hi", account="asker"))
    assert asked is not None and asked.notice and asked.text == "ask the owner for access"
    ok = await gw.handle_inbound(untrusted("hi", account="friend"))
    assert ok is not None and not ok.notice
    users = [r["user_id"] for r in select_rows(gw.state, "SELECT user_id FROM identities")]
    assert len(users) == 1, "refused senders never get a user, a session or a transcript"


async def test_without_any_access_plugin_untrusted_senders_are_refused(make_gateway: Any) -> None:
    gw = await make_gateway()
    assert await gw.handle_inbound(untrusted("hello")) is None
    assert select_rows(gw.state, "SELECT * FROM turns") == []


async def test_persistent_dedupe_survives_restart(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with Gateway(cfg, entry_points=False) as gw:
        assert await gw.handle_inbound(trusted("once", message_id="m-1")) is not None
        assert await gw.handle_inbound(trusted("once", message_id="m-1")) is None
    async with Gateway(cfg, entry_points=False) as gw:
        assert await gw.handle_inbound(trusted("once", message_id="m-1")) is None
        assert len(select_rows(gw.state, "SELECT * FROM turns")) == 2


class Overrides:
    __name__ = "overrides"

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    @hookimpl
    def gateway_resolve_identity(self, message: InboundMessage) -> UserRef | None:
        return UserRef(user_id="fixed-user", timezone="Europe/Berlin") if message.account_id == "vip" else None

    @hookimpl
    def gateway_handle_command(self, command: str) -> Reply | None:
        return Reply(text="pong!") if command == "ping" else None

    @hookimpl
    def gateway_before_llm_call(self, request: LLMRequest) -> LLMRequest:
        return LLMRequest(system=request.system, messages=request.messages, max_tokens=77,
                          metadata=request.metadata)

    @hookimpl
    async def gateway_llm_call(self, request: LLMRequest, on_delta: Any) -> LLMResponse:
        self.requests.append(request)
        if request.messages[-1].content == "fail":
            raise LLMError("scripted", user_message="model says no")
        return LLMResponse(text="X" * 5000, provider="override")

    @hookimpl
    def gateway_render_reply(self, turn: Turn, response: LLMResponse) -> Reply:
        return Reply(text=response.text[:10], chunks=(response.text[:5], response.text[5:10]), turn_id=turn.turn_id)


async def test_overriding_first_result_hooks(make_gateway: Any) -> None:
    rec, ov = Recorder(), Overrides()
    gw = await make_gateway(plugins=(rec, ov))
    assert (await gw.handle_inbound(trusted("/ping"))).text == "pong!"  # type: ignore[union-attr]
    reply = await gw.handle_inbound(trusted("hello", account="vip"))
    assert reply is not None and reply.chunks == ("XXXXX", "XXXXX")
    assert ov.requests[-1].max_tokens == 77
    assert "Europe/Berlin" in next(s.text for s in ov.requests[-1].system if s.source == "system")
    assert select_one(gw.state, "SELECT user_id FROM turns")["user_id"] == "fixed-user"  # type: ignore[index]
    failed = await gw.handle_inbound(trusted("fail"))
    assert failed is not None and failed.notice and failed.text == "model says no"
    assert isinstance(rec.errors[-1], LLMError)


class SlowAndBrokenCommands:
    __name__ = "slow-and-broken"

    @hookimpl
    async def gateway_handle_command(self, command: str) -> Reply | None:
        if command == "slow":
            await asyncio.sleep(0.6)  # past plugins.hook_timeout_s below
            return Reply(text="slow but done")
        if command == "broken":
            raise RuntimeError("scripted command failure")
        return None


async def test_a_slow_command_completes_and_a_broken_one_says_it_failed(make_gateway: Any, tmp_path: Path) -> None:
    # A command is not cut off by the hook timeout (cancelling it halfway would leave it half done), and a
    # handler that raises is reported as a failure, not as an unknown command the person mistyped.
    plugin = SlowAndBrokenCommands()
    config = test_config(tmp_path / "data", extra_plugins=(plugin,), plugins={"hook_timeout_s": 0.2})
    gw = await make_gateway(plugins=(plugin,), config=config)
    slow = await gw.handle_inbound(trusted("/slow"))
    assert slow is not None and slow.text == "slow but done"
    broken = await gw.handle_inbound(trusted("/broken"))
    assert broken is not None and broken.notice
    assert "/broken did not complete" in broken.text and "Unknown" not in broken.text
    nobody = await gw.handle_inbound(trusted("/nosuchthing"))
    assert nobody is not None and "Unknown command /nosuchthing" in nobody.text


async def test_handle_turn_protocol_can_be_replaced(make_gateway: Any) -> None:
    class Protocol:
        __name__ = "protocol"

        @hookimpl
        async def gateway_handle_turn(self, turn: Turn) -> Reply:
            return Reply(text=f"custom protocol saw {turn.message.text!r}")

    gw = await make_gateway(plugins=(Protocol(),))
    reply = await gw.handle_inbound(trusted("hi"))
    assert reply is not None and reply.text == "custom protocol saw 'hi'"


async def test_default_render_splits_to_adapter_limit(make_gateway: Any) -> None:
    class Tiny(Adapter):
        name = "tiny"
        max_message_chars = 50

        async def run(self) -> None:
            return None

        async def send(self, address: Any, reply: Reply) -> None:
            return None

    class Registers:
        __name__ = "registers"

        @hookimpl
        def gateway_register_adapters(self, register: Any) -> None:
            register(Tiny)

    class Long:
        __name__ = "long"

        @hookimpl
        def gateway_llm_call(self) -> LLMResponse:
            return LLMResponse(text=" ".join(f"word{i}" for i in range(60)))

    gw = await make_gateway(plugins=(Registers(), Long()))
    reply = await gw.handle_inbound(InboundMessage(channel="tiny", account_id="a", text="x", trusted=True))
    assert reply is not None and len(reply.chunks) > 1
    assert all(len(c) <= 50 for c in reply.chunks) and " ".join(reply.chunks) == reply.text


def test_duplicate_adapter_names_are_a_startup_error(tmp_path: Path) -> None:
    from adapters.websocket import WebSocketAdapter

    class Twice:
        __name__ = "twice"

        @hookimpl
        def gateway_register_adapters(self, register: Any) -> None:
            register(WebSocketAdapter)

    # One duplicate policy for adapters, jobs and tools (gateway/registry.py): the message names both
    # plugins; it used to say "two plugins register an adapter named 'websocket'".
    gw = Gateway(make_config(tmp_path), plugins=(Twice(),), entry_points=False)
    both = r"\((twice and adapters.websocket|adapters.websocket and twice)\)"
    with pytest.raises(ConfigError, match=r"adapter 'websocket' registered twice " + both):
        collect_registrations(gw.hooks, gw.config)


# ------------------------------------------------------------------------------------- meta-tests
def _hook_names() -> list[str]:
    return [n for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("gateway_")]


def test_every_hook_is_documented() -> None:
    doc = (ROOT / "docs" / "hooks.md").read_text()
    missing = [n for n in _hook_names() if f"### `{n}`" not in doc]
    assert not missing, f"hooks missing from docs/hooks.md: {missing}"
    documented = re.findall(r"^### `(gateway_\w+)`", doc, flags=re.MULTILINE)
    unknown = sorted(set(documented) - set(_hook_names()))
    assert not unknown, f"docs/hooks.md documents hooks that have no hookspec: {unknown}"


def test_every_hook_has_a_test() -> None:
    text = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    untested = [n for n in _hook_names() if not re.search(rf"\bdef {n}\b", text)]
    assert not untested, f"hooks without a test: {untested}"
