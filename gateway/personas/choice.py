"""Which persona a person talks to, per conversation: the person's choice, else the operator's defaults.

Order (first match wins), for a person in a direct conversation:

1. the person's choice for this conversation (``/persona NAME``);
2. the person's own default (``/persona NAME default``);
3. the operator's mapping of this conversation (``personas.conversations``);
4. the operator's default for this person (``personas.user_defaults``);
5. the operator's mapping of the channel (``personas.channels``), then ``personas.default``.

A group conversation is shared by its members, so only the operator chooses its persona (3, 5): one
member's ``/persona`` never changes what another member talks to. A choice is stored per person
(``State.persona_choices``), so A's ``/persona developer`` never changes B's. A stored choice that
names a persona the person may no longer use (``personas.user_personas``) is skipped; one that names a
persona removed from disk is caught at turn time by ``gateway.personas.resolve``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.config import Config
from gateway.personas import PersonaError, check_name, resolve
from gateway.personas.own import visible_to
from gateway.personas.which import DEFAULT_KEY, resolve_for
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services
    from gateway.types import Turn



def on_disk(data_dir: Path) -> list[str]:
    base = Path(data_dir) / "personas"
    if not base.is_dir():
        return []
    # Dot-names are imports in progress (gateway/personas/card_import.py), never personas.
    return sorted(p.name for p in base.iterdir() if not p.name.startswith(".") and p.is_dir()
                  and not p.is_symlink() and (p / "IDENTITY.md").is_file())  # fmt: skip


def allowed(config: Config, user_id: str) -> list[str]:
    """The personas ``user_id`` may choose: the operator's list for them, else every persona on disk or
    named in the config except the ones other people made (``gateway/personas/own.py``)."""
    pc = config.personas
    listed = pc.user_personas.get(user_id)
    if listed is not None:
        return sorted({*listed, *([pc.user_defaults[user_id]] if user_id in pc.user_defaults else [])})
    data_dir = Path(config.data_dir)
    return sorted({*visible_to(data_dir, on_disk(data_dir), user_id), *pc.names()})


# ------------------------------------------------------------------------------ the contract's API


def persona_for(gateway: Services, user_id: str, conversation_key: str) -> str:
    """The persona ``user_id`` talks to in the direct conversation ``conversation_key``."""
    return resolve_for(gateway.state, gateway.config, user_id, conversation_key)


def available(gateway: Services, user_id: str) -> list[str]:
    """The personas ``user_id`` may choose (sorted)."""
    return allowed(gateway.config, user_id)


def choose(gateway: Services, user_id: str, name: str, *, conversation_key: str | None = None) -> None:
    """Remember ``name`` for ``user_id`` in ``conversation_key`` (None: as the person's own default).

    Raises ``PersonaError`` for a name that is invalid, does not exist or is not the person's to use.
    The running session keeps its persona; ``/persona`` starts a new session to switch at once.
    """
    check_name(name)
    names = available(gateway, user_id)
    if name not in names:
        raise PersonaError(f"no persona {name!r} for you; choose one of: {', '.join(names) or '(none)'}")
    if name not in on_disk(gateway.data_dir) and name not in gateway.config.personas.names():
        raise PersonaError(f"persona {name!r} does not exist")
    key = DEFAULT_KEY if conversation_key is None else conversation_key
    gateway.state.persona_choices.choose(user_id, key, name, datetime.now(UTC))


def clear(gateway: Services, user_id: str, *, conversation_key: str | None = None) -> bool:
    """Forget the choice (None: the person's own default); the operator's defaults apply again."""
    return gateway.state.persona_choices.clear(user_id, DEFAULT_KEY if conversation_key is None else conversation_key)


# name asked for -> persona that answers, per turn: the persona and lore stages both ask, and each
# answer checks the persona's files on disk.
RESOLVED: StashKey[dict[str, str]] = StashKey()


def turn_persona(gateway: Services, turn: Turn) -> str:
    """The persona speaking in ``turn``: its session's (a session keeps the persona it started with),
    else the conversation's choice; one that no longer exists falls back to the default."""
    if turn.session is not None:
        name = turn.session.persona
    elif turn.user is not None:
        name = gateway.sessions.persona(turn.user, turn.message)
    else:
        msg = turn.message
        name = gateway.config.personas.for_conversation(msg.channel, msg.conversation_key)
    resolved = turn.stash.setdefault(RESOLVED, {})
    if name not in resolved:
        resolved[name] = resolve(gateway, name)
    return resolved[name]
