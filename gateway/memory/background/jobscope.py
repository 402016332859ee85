"""Where a background job's work lands: the memory root, timezone and fact scope of a session scope.

A session's ``scope_key`` is ``user:<id>`` for direct conversations and ``conv:<conversation key>``
for a group. A direct conversation's memory is the user's tree, in the user's timezone, with facts
scoped to the user id; a group's memory is its channel root (``channel:<channel>-<conversation>``),
in the gateway's timezone, with facts scoped to that channel scope, so shared-room content never
lands in a person's memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gateway.memory.files.scopes import channel_scope, user_scope

if TYPE_CHECKING:
    from gateway.services import Services


@dataclass(frozen=True, slots=True, kw_only=True)
class JobScope:
    memory_scope: str  # user:<id> | channel:<channel>-<conversation>: memory root and progress key
    sessions: str  # the sessions.scope_key the transcript is read from
    kg_scope: str  # knowledge-graph scope: the user id, or the channel scope
    tz: ZoneInfo
    user_id: str = ""  # set for a person's scope


def zone(name: str | None, default: str = "UTC") -> ZoneInfo:
    try:
        return ZoneInfo(name or default)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo(default)


def for_user(gateway: Services, user_id: str) -> JobScope:
    user = gateway.state.users.get(user_id)
    tz = zone(user.timezone if user else None, gateway.config.timezone)
    return JobScope(memory_scope=user_scope(user_id), sessions=f"user:{user_id}", kg_scope=user_id,
                    user_id=user_id, tz=tz)  # fmt: skip


def for_conversation(gateway: Services, conversation_key: str) -> JobScope:
    scope = channel_scope(conversation_key)
    return JobScope(memory_scope=scope, sessions=f"conv:{conversation_key}", kg_scope=scope,
                    tz=zone(gateway.config.timezone))  # fmt: skip


def for_session_scope(gateway: Services, scope_key: str) -> JobScope:
    kind, _, rest = scope_key.partition(":")
    return for_user(gateway, rest) if kind == "user" else for_conversation(gateway, rest)


def store(gateway: Services, scope: JobScope) -> Any:
    """The guarded (and, in the gateway, indexed) store of the scope's root."""
    return gateway.memory.stores.store_for(scope.memory_scope)


def display_names(gateway: Services, user_id: str) -> tuple[str, ...]:
    return tuple(gateway.state.users.names(user_id))
