"""``/web``: a one-time link that signs the person in to the web app, from any linked channel.

Answered only in a direct conversation (in a group everyone would see a link to the sender's memory)
and never on a channel with identity scope 'channel' (its accounts are not a person). The link is
valid once, for 15 minutes (``gateway/http/signin.py``). Command answers are not part of the
transcript, so the token is not stored with the conversation. See docs/security.md#sign-in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.http.signin import LINK_TTL, mint_link
from gateway.turn.command_registry import CommandRegistry
from gateway.types import ConversationKind, Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services


@hookimpl
def gateway_register_commands(register: CommandRegistry, config: Config) -> None:
    register("web", "/web: a one-time link that signs you in to the web app (chat, memory console)")


@hookimpl
async def gateway_handle_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
    if command != "web" or turn.user is None:
        return None
    msg = turn.message
    if gateway.config.identity.scope_for(msg.channel) == "channel":
        return Reply(text="This channel keeps its own identity (identity scope 'channel'); web sign-in is off "
                          "here. Send /web from a channel linked to you.", notice=True)
    if msg.kind is not ConversationKind.DM:
        return Reply(text="Send /web in a direct conversation with me: a sign-in link must not be shown to a "
                          "group.", notice=True)
    link = mint_link(gateway, turn.user.user_id, operator=False, issued_by=f"/web on {msg.channel}")
    minutes = int(LINK_TTL.total_seconds() // 60)
    return Reply(text=f"Your sign-in link for the web app (works once, for {minutes} minutes; don't share it):\n"
                      f"{link.url}", notice=True)
