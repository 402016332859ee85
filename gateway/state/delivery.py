"""The delivery outbox and a person's delivery settings, as they cross the storage seam.

One row per proactive message (a reminder, a notice, a briefing), recorded before it is sent:
``status`` is ``pending`` (to try at ``due_at``), ``sending`` (claimed; ``due_at`` is the lease's
end, after which a crashed attempt is tried again), ``missed`` (no channel could take it; the web
chat and WebSocket clients get it on their next connection), ``sent`` or ``failed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from gateway.state.records import Conversation


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEntry:
    delivery_id: str
    user_id: str
    kind: str  # reminder | notice | briefing | prompt | task ... (free text: what the caller says it is)
    text: str
    notice: bool
    origin: str  # "channel|conversation_id|kind|persona", or "" when it belongs to no conversation
    status: str
    due_at: datetime
    attempts: int
    created_at: datetime
    sent_at: datetime | None
    channel: str  # where it went (sent), or ""
    detail: str  # the last failure, or why it is held


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryPrefs:
    """A person's delivery settings; every field empty means "the defaults"."""

    preferred_channel: str = ""
    quiet_start: str = ""  # "HH:MM" in the person's timezone; both set or both empty
    quiet_end: str = ""
    notify_conversation: str = ""  # conversation key of background notices (distillation ...)


class OutboxStore(Protocol):
    def record(self, entry: OutboxEntry) -> OutboxEntry: ...  # the stored row: the new one, or the existing one
    def get(self, delivery_id: str) -> OutboxEntry | None: ...
    def claim(self, delivery_id: str, *, now: datetime, lease_until: datetime) -> OutboxEntry | None: ...
    def take_missed(self, delivery_id: str, *, lease_until: datetime) -> bool: ...
    def mark_sent(self, delivery_id: str, *, channel: str, at: datetime) -> bool: ...
    def mark_missed(self, delivery_id: str, *, detail: str) -> bool: ...
    def reschedule(self, delivery_id: str, *, due_at: datetime, detail: str) -> bool: ...
    def mark_failed(self, delivery_id: str, *, detail: str) -> bool: ...
    def due(self, now: datetime, *, limit: int = 100) -> list[OutboxEntry]: ...
    def missed_for(self, user_id: str, *, limit: int = 100) -> list[OutboxEntry]: ...
    def list_for(self, user_id: str, *, limit: int = 100) -> list[OutboxEntry]: ...
    def direct_conversations(self, user_id: str) -> list[Conversation]: ...
    def counts(self) -> dict[str, int]: ...
    def prune(self, *, before: datetime, limit: int = 500) -> int: ...  # sent/failed rows last tried before
    def merge(self, *, into: str, source: str) -> None: ...
    def prefs(self, user_id: str) -> DeliveryPrefs: ...
    def set_prefs(self, user_id: str, prefs: DeliveryPrefs) -> None: ...
