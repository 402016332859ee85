"""A person's delivery settings as the settings API shows and changes them (gateway/http/api/me.py).

``preferred_channel``: a channel the person has an account on ("" = none); ``quiet_hours``:
``"HH:MM-HH:MM"`` in their timezone ("" = none; may wrap past midnight); ``notify_conversation``: the
key of one of their conversations that background notices go to ("" = routed like any message).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gateway.delivery.quiet import parse_hhmm
from gateway.state.delivery import DeliveryPrefs

if TYPE_CHECKING:
    from gateway.services import Services


class SettingError(ValueError):
    pass


def quiet_hours_text(prefs: DeliveryPrefs) -> str:
    return f"{prefs.quiet_start}-{prefs.quiet_end}" if prefs.quiet_start and prefs.quiet_end else ""


def parse_quiet_hours(value: str) -> tuple[str, str]:
    if not value:
        return "", ""
    start, sep, end = value.partition("-")
    if not sep or parse_hhmm(start.strip()) is None or parse_hhmm(end.strip()) is None or start == end:
        raise SettingError(f"quiet_hours must look like 22:00-07:00 (24-hour, local time), got {value!r}")
    return start.strip(), end.strip()


def updated(gateway: Services, user_id: str, *, preferred_channel: str | None = None,
            quiet_hours: str | None = None, notify_conversation: str | None = None) -> DeliveryPrefs:  # fmt: skip
    """The person's settings with the given fields changed, validated (raises ``SettingError``)."""
    prefs = gateway.state.outbox.prefs(user_id)
    if preferred_channel is not None:
        channels = {c for c, _ in gateway.state.identities.accounts(user_id)}
        if preferred_channel and preferred_channel not in channels:
            raise SettingError(f"preferred_channel {preferred_channel!r} is not one of this person's channels "
                               f"({', '.join(sorted(channels)) or 'none'})")  # fmt: skip
        prefs = replace(prefs, preferred_channel=preferred_channel)
    if quiet_hours is not None:
        start, end = parse_quiet_hours(quiet_hours)
        prefs = replace(prefs, quiet_start=start, quiet_end=end)
    if notify_conversation is not None:
        conv = gateway.state.conversations.get(notify_conversation) if notify_conversation else None
        if notify_conversation and (conv is None or conv.user_id != user_id):
            raise SettingError(f"notify_conversation {notify_conversation!r} is not a conversation of this person")
        prefs = replace(prefs, notify_conversation=notify_conversation)
    return prefs
