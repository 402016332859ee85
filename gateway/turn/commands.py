"""Built-in chat commands: ``/start /help /new /otr /link``, and the answer to an unknown one.

Commands are answered by the host without a model call and are not part of the transcript. Every
plugin declares the commands it answers with ``gateway_register_commands`` (``gateway/turn/command_registry.py``);
``/help`` lists them all, built-ins first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.identity.link_command import link_command
from gateway.memory.files.errors import MemoryStoreError
from gateway.personas import persona_store
from gateway.personas.choice import turn_persona
from gateway.turn.command_registry import COMMANDS, CommandRegistry
from gateway.types import ConversationKind, Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

INTRO = "I'm your assistant. I remember our conversations on every channel you use with me."
BUILTIN_HELP: dict[str, str] = {
    "new": "/new: start a fresh session (I still remember you)",
    "otr": "/otr on|off: Off-The-Record: nothing of what follows is stored, indexed or learned",
    "link": "/link: get a code to connect another account (Telegram, Discord, ...) to this one\n"
            "/link CODE: ask to connect this account to the one that produced CODE (both accounts confirm)\n"
            "/link confirm CODE, /link cancel: answer a link request",
    "help": "/help: this text",
}


def help_text(gateway: Services) -> str:
    """The shared part of ``/help``: the built-in commands, then every plugin's in registration order."""
    registered = gateway.stash[COMMANDS]
    names = [n for n in BUILTIN_HELP if n in registered] + [n for n in registered if n not in BUILTIN_HELP]
    lines = [line for name in names for line in registered[name].lines]
    return INTRO + "\n\nCommands:\n" + "\n".join(lines)


def unknown(command: str) -> Reply:
    """No plugin answered ``/command``: say so instead of sending it to the model as a message."""
    return _notice(f"Unknown command /{command}. /help lists the commands.")


def failed(command: str) -> Reply:
    """The plugin answering ``/command`` raised: its error is in the log, under the plugin's name."""
    return _notice(f"Sorry, /{command} did not complete: it failed with an error, which is in the operator's log.")


def persona_help(gateway: Services, turn: Turn) -> str:
    """The HELP.md of the persona this conversation talks to, after the shared help ("" if none)."""
    name = turn_persona(gateway, turn)  # the person's /persona choice, else the operator's mapping
    try:
        text = persona_store(gateway, name).read("HELP.md").strip()
    except MemoryStoreError:
        return ""
    return "\n\n" + text if text else ""


def _notice(text: str) -> Reply:
    return Reply(text=text, notice=True)


@hookimpl
def gateway_register_commands(register: CommandRegistry, config: Config) -> None:
    for name, text in BUILTIN_HELP.items():
        register(name, text)


@hookimpl(trylast=True)
async def gateway_handle_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
    user = turn.user
    msg = turn.message
    if user is None:
        return None
    now = turn.received_at
    sessions = gateway.sessions
    if command in ("start", "help"):
        extra = "" if gateway.model_ready else "\n\nNote: " + gateway.model_help
        return _notice(help_text(gateway) + persona_help(gateway, turn) + extra)
    if command == "new":
        sessions.new(user, msg, now)
        await gateway.hooks.conversation_changed(gateway, user_id=user.user_id)
        return _notice("Started a new session. I still remember you; the conversation context is fresh.")
    if command == "otr":
        arg = args.lower()
        if arg in ("", "status"):
            on = sessions.is_otr(user, msg)
            return _notice(f"Off-The-Record is {'ON' if on else 'off'}. Use /otr on or /otr off.")
        if arg == "on":
            if sessions.is_otr(user, msg):
                return _notice("Off-The-Record is already on.")
            sessions.start_otr(user, msg, now)
            await gateway.hooks.conversation_changed(gateway, user_id=user.user_id)
            return _notice(
                "Off-The-Record is ON. Nothing from now on is stored, indexed or learned, until /otr off."
            )
        if arg == "off":
            if not sessions.end_otr(user, msg):
                return _notice("Off-The-Record was not on.")
            await gateway.hooks.conversation_changed(gateway, user_id=user.user_id)
            return _notice("Off-The-Record is off. That conversation is gone; normal memory resumes.")
        return _notice("Usage: /otr on | /otr off")
    if command == "link":
        if gateway.config.identity.scope_for(msg.channel) == "channel":
            return _notice("This channel keeps its own identity (identity scope 'channel'); linking is off.")
        if msg.kind is ConversationKind.GROUP:
            return _notice("Linking only works in a direct conversation with me.")
        return await link_command(gateway, turn, args)
    return None
