"""The operator's model set-up from the browser (``gateway.llm.setup``; docs/web.md#setting-up-the-model).

``GET`` says whether a model is configured; ``POST .../test`` tries settings without keeping them (a
one-word answer, and the models the server lists); ``POST`` tries them with the chosen model, keeps
them (the key encrypted in the data directory, never in config.yaml) and applies them at once.
Operator only: a key for the model is the instance's, not a person's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import Field

from gateway.config import LLMConfig
from gateway.http.api.spec import Answer, ApiError, Body, Call, Route
from gateway.llm import setup as model_setup
from gateway.llm.setup import Provider, SetupError

PATH = "/api/setup/model"


class ModelState(Answer):
    configured: bool = Field(description="the main role has a usable model")
    provider: str = Field(description="the provider running now (none: no model)")
    model: str
    source: str = Field(description="config: config.yaml or the environment; browser: this set-up; none")


class ModelSettings(Body):
    provider: Provider = Field(description="anthropic, openai, or compatible (any OpenAI-compatible server)")
    base_url: str = Field("", max_length=500, description="the server's URL, for compatible")
    api_key: str = Field("", max_length=500, description="not needed by most local servers")
    model: str = Field("", max_length=200, description="empty: only test the connection and list the models")


class Trial(Answer):
    ok: bool
    message: str
    answer: str = Field("", description="what the model said to 'Reply with the word OK.'")
    models: list[str] = Field(default_factory=list, description="the models the server lists (may be empty)")


def _state(call: Call) -> ModelState:
    gw = call.gateway
    configured = gw.model_ready
    saved = model_setup.stored(Path(gw.config.data_dir))
    source = "none"
    if configured:
        from_browser = saved is not None and saved["model"] == gw.config.llm.model
        source = "browser" if from_browser else "config"
    return ModelState(configured=configured, provider=gw.llm().name, model=gw.config.llm.model if configured else "",
                      source=source)  # fmt: skip


async def state(call: Call) -> ModelState:
    return _state(call)


async def _try(call: Call) -> tuple[Trial, LLMConfig | None]:
    body: ModelSettings = call.body
    try:
        llm = model_setup.candidate(call.gateway.config, provider=body.provider, model=body.model,
                                    base_url=body.base_url, api_key=body.api_key)  # fmt: skip
        answer, models = await model_setup.try_model(llm)
    except SetupError as exc:
        return Trial(ok=False, message=str(exc)), None
    said = f"The model answered: {answer!r}." if body.model else "The server answered."
    listed = f" It lists {len(models)} model{'' if len(models) == 1 else 's'}." if models else ""
    return Trial(ok=True, message=said + listed, answer=answer, models=models), llm


async def try_settings(call: Call) -> Trial:
    result, _ = await _try(call)
    return result


async def save(call: Call) -> ModelState:
    body: ModelSettings = call.body
    if not body.model.strip():
        raise ApiError(400, "choose a model first")
    result, llm = await _try(call)
    if not result.ok or llm is None:
        raise ApiError(400, f"not saved: {result.message}")
    gw = call.gateway
    await asyncio.to_thread(model_setup.save, Path(gw.config.data_dir), provider=body.provider, llm=llm)
    gw.replace_llm(llm)
    return _state(call)


ROUTES = [
    Route("GET", PATH, "whether a model is configured, and where from", ModelState, state, operator=True,
          tag="setup", errors=(401, 403)),
    Route("POST", PATH + "/test", "try model settings without keeping them", Trial, try_settings, body=ModelSettings,
          operator=True, tag="setup", errors=(400, 401, 403),
          description="ok=false with the reason when the server cannot be reached or refuses the key."),
    Route("POST", PATH, "try, keep and apply model settings (no restart)", ModelState, save, body=ModelSettings,
          operator=True, tag="setup", errors=(400, 401, 403),
          description="The key is kept encrypted in the data directory, never in config.yaml."),
]
