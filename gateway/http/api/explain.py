"""The exact prompt a message would get, section by section (operator): ``gateway.turn.explain`` run in the
daemon, which holds the live memory index, without calling the model and without writing anything.
``kith context`` asks it while a daemon runs (gateway/cli/context.py); the record of what a past turn
saw is ``turns.py``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from gateway.channels import CHANNEL_NAME
from gateway.http.api.spec import Answer, ApiError, Body, Call, Route
from gateway.turn.explain import explain


class PreviewBody(Body):
    message: str = Field(min_length=1, max_length=100_000, description="the message text, as the person would send it")
    channel: str = Field("websocket", pattern=CHANNEL_NAME.pattern, description="the channel it arrives on")
    conversation: str = Field("", max_length=200, description="a group conversation id, without control "
                              "characters; empty: a direct conversation")
    tier: int | None = Field(None, ge=1, le=4, description="the context tier; null: as configured")


class PreviewSession(Answer):
    id: str
    new: bool = Field(description="a new session would start (session-start injection applies)")
    otr: bool


class PromptPreview(Answer):
    model_config = ConfigDict(extra="allow")
    user: str
    channel: str
    conversation: str
    tier: int
    session: PreviewSession
    budget_tokens: int
    system_tokens: int
    message_tokens: int
    sections: list[dict[str, Any]] = Field(description="{title, source, tokens, stability, cached, priority, "
                                           "trim_rank, protected, as_data, trimmed_from, text}, in prompt order")
    trims: list[dict[str, Any]] = Field(description="{source, before, after, reason}")
    messages: list[dict[str, Any]] = Field(description="{role, tokens, content}: the history and the message")
    tools: list[str]
    recall_skipped: str | None = None
    recall_filter: dict[str, Any] | None = None
    system: Any = Field(description="the system blocks as sent to the model (cache breakpoints included)")


async def preview(call: Call) -> PromptPreview:
    uid = call.user_id()
    body: PreviewBody = call.body
    try:
        result = await explain(call.gateway, user_id=uid, channel=body.channel, text=body.message,
                               conversation=body.conversation, tier=body.tier)  # fmt: skip
    except ValueError as exc:  # ExplainError and what the stages refuse of the message
        raise ApiError(400, str(exc)) from None
    return PromptPreview.model_validate(result)


ROUTES = [
    Route("POST", "/api/users/{uid}/context", "the prompt a message would get now, section by section (operator)",
          PromptPreview, preview, body=PreviewBody, operator=True, tag="operator", errors=(400, 401, 403, 404),
          description="Nothing is written and no model is called; the session is peeked, not started."),
]
