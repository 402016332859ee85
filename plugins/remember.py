"""Built-in plugin: ``/remember TEXT`` and ``/forget TEXT`` on every channel.

The work is the host's (``gateway.memory.edit.remember``, ``gateway.memory.edit.forget``); this plugin is
the chat surface and its rails: only in a direct conversation (a group reads the answer, and the
lines shown would be the speaker's private memory), never Off-The-Record (nothing is written there),
and a broad forget is shown line by line and applied only on ``/forget confirm``.

    /remember TEXT        keep TEXT (REMEMBERED.md)
    /forget TEXT          forget what matches TEXT (asks first when the match is broad)
    /forget confirm       apply the forget shown last;  /forget cancel  drop it
    /forget undo          put back what the last forget removed (kept 7 days)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.memory.edit.forget import cancel_pending, forget, undo_forget
from gateway.memory.edit.remember import remember
from gateway.turn.command_registry import CommandRegistry
from gateway.types import ConversationKind, Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.remember")

HELP = {
    "remember": "/remember TEXT: keep TEXT in my memory of you",
    "forget": "/forget TEXT: forget what matches TEXT (lines of your memory files, facts, search entries);"
              " I show what goes and ask first when the match is broad\n"
              "/forget confirm, /forget cancel: answer that question\n"
              "/forget undo: put back what the last /forget removed",
}


def _notice(text: str) -> Reply:
    return Reply(text=text, notice=True)


@hookimpl
def gateway_register_commands(register: CommandRegistry, config: Config) -> None:
    for name, text in HELP.items():
        register(name, text)


def refusal(gateway: Services, turn: Turn) -> str:
    """Why this conversation may not change the speaker's memory ("" = it may)."""
    if gateway.memory is None or gateway.kg is None:
        return "My memory is not running right now."
    if turn.message.kind is ConversationKind.GROUP:
        return "That works only in a direct conversation with me: your memory is private."
    assert turn.user is not None
    if gateway.sessions.is_otr(turn.user, turn.message):
        return "Off-The-Record is on: nothing is written to memory. Use /otr off first."
    return ""


@hookimpl
async def gateway_handle_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
    if command not in HELP or turn.user is None:
        return None
    why = refusal(gateway, turn)
    if why:
        return _notice(why)
    user_id = turn.user.user_id
    if command == "remember":
        report = await remember(gateway, user_id, args, actor="person", message_id=turn.turn_id)
        return _notice(report.message)
    word = args.strip().lower()
    if not args.strip():
        return _notice("Usage: /forget TEXT | /forget confirm | /forget cancel | /forget undo")
    if word == "cancel":
        return _notice("Cancelled: nothing was forgotten." if cancel_pending(gateway, user_id)
                       else "Nothing was waiting for confirmation.")  # fmt: skip
    if word == "undo":
        return _notice((await undo_forget(gateway, user_id, actor="person")).message)
    if word == "confirm":
        return _notice((await forget(gateway, user_id, ref="pending:", actor="person")).describe())
    return _notice((await forget(gateway, user_id, text=args, actor="person")).describe())
