"""Who am I, and a person's settings: display name, timezone, persona, context tier.

The timezone is stored on the user and is authoritative: every turn reads the user record
(``Identities.resolve``), so the next prompt's date line (``plugins/system_block.py``), the session
log's dates and the person's nightly jobs follow a change at once. The tier is the person's own
choice; a request's tier and an operator's per-conversation tier still win over it (``gateway/turn/tiers.py``).
"""

from __future__ import annotations

import functools
import zoneinfo

from pydantic import Field

from gateway.delivery import settings as delivery_settings
from gateway.http.api.spec import Answer, ApiError, Body, Call, Route
from gateway.http.principal import csrf_token
from gateway.personas import PersonaError
from gateway.personas import choice as personas
from gateway.turn.tiers import MAX_TIER, MIN_TIER


class Account(Answer):
    channel: str
    account_id: str


class Me(Answer):
    user_id: str | None = Field(description="null for the operator token, which stands for no person")
    display_name: str
    timezone: str
    persona: str
    personas: list[str] = Field(description="the personas this person may choose")
    tier: int | None = Field(description="the person's own context tier; null: the configured default")
    operator: bool
    accounts: list[Account]
    csrf: str | None = Field(description="send as X-CSRF-Token with every change (cookie sign-in only)")


class Settings(Answer):
    user_id: str
    display_name: str
    timezone: str
    persona: str
    tier: int | None
    preferred_channel: str = Field("", description="where proactive messages go first (docs/proactive.md)")
    quiet_hours: str = Field("", description="HH:MM-HH:MM in the person's timezone; proactive messages wait")
    notify_conversation: str = Field("", description="conversation key of background notices; '': routed")


class SettingsPatch(Body):
    display_name: str | None = Field(None, min_length=1, max_length=100)
    timezone: str | None = Field(None, min_length=1, max_length=64, description="an IANA zone, e.g. Europe/Berlin")
    persona: str | None = Field(None, max_length=64, description="null: back to the operator's default")
    tier: int | None = Field(None, ge=MIN_TIER, le=MAX_TIER, description="1-4; null: the configured default")
    preferred_channel: str | None = Field(None, max_length=64, description="one of the person's channels; ''")
    quiet_hours: str | None = Field(None, max_length=11, description="e.g. 22:00-07:00; '' for none")
    notify_conversation: str | None = Field(None, max_length=300, description="a conversation key; ''")


@functools.cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def valid_timezone(name: str) -> bool:
    return name in _zones() or name == "UTC"


def persona_of(call: Call, user_id: str) -> str:
    return personas.persona_for(call.gateway, user_id, personas.DEFAULT_KEY)


def settings_of(call: Call, user_id: str) -> Settings:
    user = call.gateway.state.users.get(user_id)
    if user is None:
        raise ApiError(404, "no such user")
    prefs = call.gateway.state.outbox.prefs(user_id)
    return Settings(user_id=user_id, display_name=user.display_name, timezone=user.timezone,
                    persona=persona_of(call, user_id), tier=user.tier, preferred_channel=prefs.preferred_channel,
                    quiet_hours=delivery_settings.quiet_hours_text(prefs),
                    notify_conversation=prefs.notify_conversation)  # fmt: skip


async def me(call: Call) -> Me:
    who = call.who()
    gw = call.gateway
    csrf = csrf_token(call.request)
    if who.user_id is None:
        return Me(user_id=None, display_name="operator", timezone=gw.config.timezone,
                  persona=gw.config.personas.default, personas=[], tier=None, operator=who.operator, accounts=[],
                  csrf=csrf)  # fmt: skip
    s = settings_of(call, who.user_id)
    accounts = [Account(channel=c, account_id=a) for c, a in gw.state.identities.accounts(who.user_id)]
    return Me(user_id=s.user_id, display_name=s.display_name, timezone=s.timezone, persona=s.persona,
              personas=personas.available(gw, who.user_id), tier=s.tier, operator=who.operator, accounts=accounts,
              csrf=csrf)  # fmt: skip


async def patch_settings(call: Call) -> Settings:
    uid = call.user_id()
    body: SettingsPatch = call.body
    given = body.model_fields_set
    state = call.gateway.state
    if "timezone" in given and (body.timezone is None or not valid_timezone(body.timezone)):
        raise ApiError(400, f"unknown timezone {body.timezone!r}: use an IANA name such as Europe/Berlin")
    if "display_name" in given and (body.display_name is None or not body.display_name.strip()):
        raise ApiError(400, "display_name must not be empty")
    if "persona" in given:
        try:
            if body.persona is None:
                personas.clear(call.gateway, uid)
            else:
                personas.choose(call.gateway, uid, body.persona)
        except PersonaError as exc:
            raise ApiError(400, str(exc)) from None
    delivery = {k: getattr(body, k) or "" for k in ("preferred_channel", "quiet_hours", "notify_conversation")
                if k in given}
    try:
        prefs = delivery_settings.updated(call.gateway, uid, **delivery) if delivery else None
    except delivery_settings.SettingError as exc:
        raise ApiError(400, str(exc)) from None
    with state.tx():
        if prefs is not None:
            state.outbox.set_prefs(uid, prefs)
        if "display_name" in given and body.display_name is not None:
            state.users.set_display_name(uid, body.display_name.strip())
        if "timezone" in given and body.timezone is not None:
            state.users.set_timezone(uid, body.timezone)
        if "tier" in given:
            state.users.set_tier(uid, body.tier)
    if given:
        # Open chats show persona and tier (the WebSocket ``state`` frame): they refresh now.
        await call.gateway.hooks.conversation_changed(call.gateway, user_id=uid)
    return settings_of(call, uid)


async def get_settings(call: Call) -> Settings:
    return settings_of(call, call.user_id())


ROUTES = [
    Route("GET", "/api/me", "who is signed in, their settings and accounts", Me, me, tag="me", errors=(401,)),
    Route("GET", "/api/users/{uid}/settings", "a person's settings", Settings, get_settings, tag="me"),
    Route("PATCH", "/api/users/{uid}/settings", "change name, timezone, persona, tier or delivery", Settings,
          patch_settings, body=SettingsPatch, tag="me",
          description="Only the fields given change. The timezone is used by the next prompt's date line."),
]
