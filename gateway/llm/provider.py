"""Built-in plugin: the default ``gateway_llm_call`` and the provider registry by role.

Providers are addressed by role (``main``, ``cheap``, ``vision``, ``transcription`` and any name under
``llm.roles``), each with its own provider, model and limits, so callers never name a vendor.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gateway.config import LLMConfig
from gateway.hookspecs import hookimpl
from gateway.llm import health as model_health
from gateway.llm.base import NO_MODEL_HELP, DeltaCallback, LLMError, Provider
from gateway.llm.echo import EchoProvider
from gateway.llm.usage import over_budget
from gateway.llm.usage import record as record_usage
from gateway.types import LLMRequest, LLMResponse, StashKey, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.llm")


class NoModelProvider:
    """Stands in when no API key is configured: the daemon runs and says how to fix it."""

    name = "none"

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse:
        raise LLMError("no model configured", user_message=NO_MODEL_HELP)

    async def close(self) -> None:
        return None


NO_MODEL_WARNED: StashKey[set[str]] = StashKey()  # jobs already logged as skipped for want of a model


def model_configured(gateway: Services, role: str, job: str, *, structured: bool = False, user_id: str = "") -> bool:
    """For background jobs: False (logged once per job) when no model can do the job for ``role``.

    A missing API key is not an outage: retrying and dead-lettering a nightly job for every user would
    only bury real failures. Jobs skip cleanly instead, and their watermarks stay where they are, so
    the work is done once a model is configured. ``structured``: the job parses a structured answer,
    which the ``echo`` dry-run provider cannot give (it would fail, retry and dead-letter every time).
    ``user_id``: the person the job works for; False (logged) once their daily budget is spent.
    """
    provider = gateway.llm(role)
    if isinstance(provider, NoModelProvider):
        reason = f"no language model is configured for the {role!r} role (set ANTHROPIC_API_KEY, docs/models.md)"
    elif structured and isinstance(provider, EchoProvider):
        reason = "the echo provider cannot write structured memory"
    else:
        return not over_budget(gateway, user_id, job)
    warned = gateway.stash.setdefault(NO_MODEL_WARNED, set())
    if job not in warned:
        warned.add(job)
        log.warning("%s skipped: %s", job, reason)
    return False


def names_a_model(config: LLMConfig) -> bool:
    """Whether these settings reach a model: a key, or (``openai``) a server URL, or ``echo``. Without,
    ``make_provider`` stands in with ``NoModelProvider`` (and the web chat offers the set-up)."""
    has_key = config.api_key is not None and bool(config.api_key.get_secret_value())
    if config.provider == "openai":
        return has_key or config.base_url is not None
    return config.provider == "echo" or has_key


def make_provider(config: LLMConfig, *, warn: bool = True) -> Provider:
    """The provider for one role's effective settings (``LLMConfig.role``)."""
    if config.provider == "echo":
        return EchoProvider()
    if not names_a_model(config):
        if warn:
            log.warning(NO_MODEL_HELP)
        return NoModelProvider()
    if config.provider == "openai":
        from gateway.llm.openai import OpenAIProvider

        return OpenAIProvider(config)
    from gateway.llm.anthropic import AnthropicProvider

    return AnthropicProvider(config)


def make_providers(config: LLMConfig) -> dict[str, Provider]:
    """One provider per configured role (docs/models.md); the missing-model help is logged once."""
    out: dict[str, Provider] = {}
    warned = False
    for name in config.role_names():
        out[name] = make_provider(config.role(name), warn=not warned)
        warned = warned or isinstance(out[name], NoModelProvider)
    return out


@hookimpl(trylast=True)
async def gateway_llm_call(
    gateway: Services, turn: Turn | None, request: LLMRequest, on_delta: DeltaCallback | None
) -> LLMResponse:
    provider = gateway.llm(request.role)
    try:
        response = await provider.complete(request, on_delta)
    except LLMError as exc:
        if not isinstance(provider, NoModelProvider):  # no model at all is set-up, not an outage
            model_health.failed(gateway.stash, request.role, exc)
        raise
    model_health.answered(gateway.stash, request.role)
    record_usage(gateway, turn, request, response)
    return response
