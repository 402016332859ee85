"""Which persona a conversation talks to (docs/personas.md, "Which persona"): from the config and the
person's stored choices alone.

The session layer asks it on every turn (``gateway/turn/sessions.py``); choosing and the commands,
which take the gateway, stay in ``gateway/personas/choice.py``.
"""

from __future__ import annotations

from gateway.config import Config
from gateway.state import State

DEFAULT_KEY = ""  # the conversation key under which a person's own default is stored


def resolve_for(state: State, config: Config, user_id: str, conversation_key: str, *, group: bool = False) -> str:
    """The persona of ``user_id`` in ``conversation_key`` (``"<channel>:<conversation id>"``)."""
    pc = config.personas
    channel = conversation_key.partition(":")[0]
    if group:
        return pc.conversations.get(conversation_key) or pc.channels.get(channel) or pc.default
    permitted = pc.user_personas.get(user_id)
    chosen = state.persona_choices.choices(user_id)  # both keys in one query: this runs every turn
    for key in (conversation_key, DEFAULT_KEY):
        name = chosen.get(key)
        if name and (permitted is None or name in permitted or name == pc.user_defaults.get(user_id)):
            return name
    return (pc.conversations.get(conversation_key) or pc.user_defaults.get(user_id) or pc.channels.get(channel)
            or pc.default)
