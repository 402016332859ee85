"""``/persona`` on every channel: list the person's personas, switch this conversation's, set a default.

``/persona`` lists; ``/persona NAME`` switches this conversation (remembered for it) and starts a new
session, since sessions are per persona; ``/persona NAME default`` makes NAME the person's own default
(every conversation without a choice of its own, this one included). In a group the operator's mapping
decides: one member's choice must not change what the others talk to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.personas import PersonaError
from gateway.personas.choice import DEFAULT_KEY, available, choose, clear, persona_for
from gateway.types import ConversationKind, Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

HELP_LINE = "/persona [NAME [default]]: list your personas, or talk to NAME here (default: everywhere)"


def _notice(text: str) -> Reply:
    return Reply(text=text, notice=True)


async def persona_command(gateway: Services, turn: Turn, args: str) -> Reply:
    user, msg = turn.user, turn.message
    assert user is not None
    key = msg.conversation_key
    if msg.kind is ConversationKind.GROUP:
        current = gateway.sessions.persona(user, msg)
        return _notice(f"In a group the operator chooses the persona (here: {current}). "
                       "Use /persona in a direct conversation with me.")  # fmt: skip
    current = persona_for(gateway, user.user_id, key)
    words = args.split()
    if not words:
        names = available(gateway, user.user_id)
        own_default = gateway.state.persona_choices.chosen(user.user_id, DEFAULT_KEY)
        lines = [f"{'*' if n == current else '-'} {n}" + (" (your default)" if n == own_default else "")
                 for n in names]  # fmt: skip
        return _notice("Personas (* = this conversation):\n" + "\n".join(lines)
                       + "\n\n/persona NAME switches here; /persona NAME default switches everywhere.")
    if len(words) > 2 or (len(words) == 2 and words[1].lower() != "default"):
        return _notice("Usage: /persona, /persona NAME, /persona NAME default")
    name = words[0].lower()
    everywhere = len(words) == 2
    try:
        if everywhere:
            choose(gateway, user.user_id, name)
            clear(gateway, user_id=user.user_id, conversation_key=key)
        else:
            choose(gateway, user.user_id, name, conversation_key=key)
    except PersonaError as exc:
        return _notice(str(exc))
    scope = "your default everywhere" if everywhere else "this conversation"
    if name == current:
        return _notice(f"{name} is now {scope}; you are already talking to {name} here.")
    # Sessions are per persona: the switch starts a new one (Off-The-Record stays on).
    if gateway.sessions.is_otr(user, msg):
        gateway.sessions.start_otr(user, msg, turn.received_at)
    else:
        gateway.sessions.new(user, msg, turn.received_at)
    await gateway.hooks.conversation_changed(gateway, user_id=user.user_id)
    return _notice(f"Now talking to {name} ({scope}); a new session started. "
                   "What you told me is still remembered.")  # fmt: skip
