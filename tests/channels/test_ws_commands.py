"""Chat commands over the WebSocket: unknown ones are the host's to answer, /help lists every command a
plugin declares (gateway_register_commands), and conversation changes reach the hook clients watch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from gateway.config import Config, ConfigError
from gateway.hookspecs import hookimpl
from gateway.testing import GatewayFactory
from gateway.turn.command_registry import CommandRegistry
from gateway.types import LLMRequest, Reply
from tests.conftest import WSClient
from tests.storage import select_rows

Connect = Callable[..., Awaitable[WSClient]]


class Plugin:
    """A third-party plugin: one declared command (/recipe), one undeclared (/ping), and a watcher."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.changed: list[str] = []

    @hookimpl
    def gateway_register_commands(self, register: CommandRegistry, config: Config) -> None:
        register("recipe", "/recipe DISH: a recipe for DISH")

    @hookimpl
    def gateway_handle_command(self, command: str, args: str) -> Reply | None:
        if command == "recipe":
            return Reply(text=f"recipe: {args}", notice=True)
        if command == "ping":
            return Reply(text="pong", notice=True)
        return None

    @hookimpl
    def gateway_before_llm_call(self, request: LLMRequest) -> None:
        self.model_calls += 1

    @hookimpl
    def gateway_conversation_changed(self, user_id: str) -> None:
        self.changed.append(user_id)


async def test_unknown_command_is_answered_by_the_host_not_the_model(kith_gateway: GatewayFactory,
                                                                     ws_connect: Connect) -> None:
    plugin = Plugin()
    gw = await kith_gateway(plugins=(plugin,))
    client = await ws_connect(gw)
    await client.hello("cmd-1")
    reply, deltas = await client.ask("/foo bar")
    assert reply["type"] == "reply" and reply["notice"] is True and deltas == []
    assert reply["text"] == "Unknown command /foo. /help lists the commands."
    assert plugin.model_calls == 0
    assert select_rows(gw.state, "SELECT * FROM turns") == []
    # commands plugins answer still work, declared or not; a path-like message is still a message
    assert (await client.ask("/ping"))[0]["text"] == "pong"
    assert (await client.ask("/recipe apple pie"))[0]["text"] == "recipe: apple pie"
    reply, _ = await client.ask("/usr/bin is where it lives")
    assert reply["notice"] is False and plugin.model_calls == 1


async def test_help_lists_builtin_and_plugin_commands(kith_gateway: GatewayFactory, ws_connect: Connect) -> None:
    gw = await kith_gateway(plugins=(Plugin(),))
    client = await ws_connect(gw)
    await client.hello("cmd-2")
    text = (await client.ask("/help"))[0]["text"]
    lines = text.splitlines()
    for usage in ("/new:", "/otr on|off:", "/link:", "/link CODE:", "/help:", "/recipe DISH:"):
        assert any(line.startswith(usage) for line in lines), (usage, text)
    # built-ins first, then plugins
    assert lines.index("/help: this text") < next(i for i, ln in enumerate(lines) if ln.startswith("/recipe"))


async def test_conversation_changes_reach_the_hook(kith_gateway: GatewayFactory, ws_connect: Connect) -> None:
    plugin = Plugin()
    gw = await kith_gateway(plugins=(plugin,))
    client = await ws_connect(gw)
    ready = await client.hello("cmd-3")
    await client.ask("/new")
    await client.ask("/otr on")
    await client.ask("/otr on")  # already on: nothing changed
    await client.ask("/otr off")
    await client.ask("/otr")  # a status question changes nothing
    assert plugin.changed == [ready["user_id"]] * 3


class BadCommands:
    @hookimpl
    def gateway_register_commands(self, register: CommandRegistry) -> None:
        register("Bad Name", "/Bad Name: nope")
        register("new", "/new: a second /new")
        register("prose", "this line is not a usage")


async def test_bad_command_registrations_refuse_startup(kith_gateway: GatewayFactory) -> None:
    with pytest.raises(ConfigError) as err:
        await kith_gateway(plugins=(BadCommands(),))
    text = str(err.value)
    assert "'Bad Name'" in text and "command 'new' registered twice" in text and "/prose" in text


def test_help_text_is_validated_and_normalised() -> None:
    reg = CommandRegistry()
    reg("web", "  /web: a sign-in link for this browser  \n\n  /web operator: the operator's  ")
    reg("long", "/long " + "x" * 600)
    assert reg["web"].lines == ["/web: a sign-in link for this browser", "/web operator: the operator's"]
    assert "long" not in reg and reg.problems


async def test_commands_in_a_turn_object(kith_gateway: GatewayFactory) -> None:
    """The unknown answer is a notice through the same rendering as every command (chunks, no session)."""
    from gateway.testing import message

    gw = await kith_gateway()
    reply = await gw.handle_inbound(message("/nosuch"))
    assert isinstance(reply, Reply) and reply.notice and reply.chunks and reply.session_id == ""
