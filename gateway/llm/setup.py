"""The model set up in the browser (the web chat's first-run wizard, docs/web.md#setting-up-the-model).

When config.yaml and the environment name no usable model, the operator picks a provider (Anthropic,
OpenAI, or any OpenAI-compatible URL such as Ollama or llama.cpp), pastes a key, tests the connection
and picks a model. What they chose is kept in the data directory, never in config.yaml:

* ``<data_dir>/setup/model.json``: provider, base URL and model (no secret), mode 0600;
* ``<data_dir>/setup/model-key.enc``: the key, encrypted with the data directory's Fernet key
  ``<data_dir>/secrets.key`` (the key the tools' credential store uses, ``plugins/tools/credentials.py``),
  mode 0600.

The settings are validated as ``kith check-config`` validates a config (``parse_config`` of the
config's own ``llm`` section with these fields over it), then applied to the running gateway at once
(``Gateway.replace_llm``: the roles' providers are rebuilt; no restart). At start-up they are applied
again, but only while config.yaml and the environment still name no model: a model configured there
always wins, and the wizard is offered only when none is.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Literal

from gateway.config import Config, LLMConfig
from gateway.configread import parse_config
from gateway.configtypes import ConfigError
from gateway.llm.base import LLMError
from gateway.llm.provider import make_provider, names_a_model
from gateway.types import HistoryMessage, LLMRequest
from gateway.util.secretbox import data_dir_fernet, write_private

log = logging.getLogger("kith.llm.setup")

Provider = Literal["anthropic", "openai", "compatible"]
FOLDER = "setup"
SETTINGS = "model.json"
KEY = "model-key.enc"
TEST_TIMEOUT_S = 20.0
MAX_MODELS = 200


class SetupError(Exception):
    """The settings are refused (invalid, or the server did not answer); the message says why."""


def needs_setup(llm: LLMConfig) -> bool:
    """True when the main role has no usable model (what ``make_provider`` would stand in for)."""
    return not names_a_model(llm)


def candidate(config: Config, *, provider: Provider, model: str, base_url: str = "", api_key: str = "") -> LLMConfig:
    """The ``llm`` section with these settings over the config's own, validated as ``kith check-config``
    validates (SetupError lists the problems)."""
    if not model.strip().isprintable():
        raise SetupError("the model name holds control characters; type it as the server lists it")
    key = api_key.strip()
    if not (key.isascii() and key.isprintable()) or " " in key:
        raise SetupError("the API key holds spaces or characters no key has; paste it again as the provider shows it")
    own = {"api_key", "base_url", "provider", "model", "cheap_model", "headers"}  # roles stay as configured
    llm: dict[str, Any] = config.llm.model_dump(mode="python", exclude=own)
    llm.update(provider="anthropic" if provider == "anthropic" else "openai", model=model.strip())
    if provider == "compatible":
        if not base_url.strip():
            raise SetupError("an OpenAI-compatible server needs its URL (for Ollama: http://127.0.0.1:11434/v1)")
        llm["base_url"] = base_url.strip()
    if key:
        llm["api_key"] = key
    elif provider != "compatible":
        raise SetupError(f"{'Anthropic' if provider == 'anthropic' else 'OpenAI'} needs an API key")
    try:
        checked = parse_config({"llm": llm}, env={})
    except ConfigError as exc:
        raise SetupError("; ".join(exc.problems)) from None
    return checked.llm


async def try_model(llm: LLMConfig) -> tuple[str, list[str]]:
    """Ask the model for a one-word answer, and list the server's models (where it can). Raises
    SetupError with what went wrong, in words for the operator."""
    provider = make_provider(llm.model_copy(update={"max_retries": 0, "timeout_s": TEST_TIMEOUT_S}), warn=False)
    try:
        models = await _models(provider, strict=not llm.model)
        if not llm.model:
            return "", models
        request = LLMRequest(system=(), messages=(HistoryMessage(role="user", content="Reply with the word OK."),),
                             max_tokens=8, stream=False)  # fmt: skip
        try:
            answer = await provider.complete(request)
        except LLMError as exc:
            raise SetupError(f"{exc} ({exc.user_message})" if str(exc) != exc.user_message else str(exc)) from None
        return answer.text.strip()[:200], models
    finally:
        await provider.close()


async def _models(provider: Any, *, strict: bool) -> list[str]:
    """The models the server lists (OpenAI-compatible ``/models``, Anthropic's ``/v1/models``); [] when
    it lists none or cannot (llama.cpp lists one, some servers none). ``strict`` (no model chosen yet,
    so the listing is the whole test): a failure is the answer, as a SetupError."""
    client = getattr(provider, "client", None)
    listing = getattr(getattr(client, "models", None), "list", None)
    if listing is None:
        return []
    try:
        page = await listing()
        out = [m.id async for m in page] if hasattr(page, "__aiter__") else [m.id for m in page.data]
    except Exception as exc:  # a listing is a convenience: the model is then typed by hand
        log.info("model setup: the server lists no models: %s", exc)
        if strict:
            why = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise SetupError(f"the server did not list its models ({why}). Check the URL and the key; a server "
                             "that lists none: type the model's name and test again") from None
        return []
    return sorted(out)[:MAX_MODELS]


def save(data_dir: Path, *, provider: Provider, llm: LLMConfig) -> None:
    folder = Path(data_dir) / FOLDER
    settings = {"provider": provider, "model": llm.model, "base_url": llm.base_url or ""}
    write_private(folder / SETTINGS, json.dumps(settings, indent=2).encode() + b"\n")
    key = llm.api_key.get_secret_value() if llm.api_key else ""
    if key:
        write_private(folder / KEY, data_dir_fernet(Path(data_dir)).encrypt(key.encode()))
    else:
        (folder / KEY).unlink(missing_ok=True)


def stored(data_dir: Path) -> dict[str, str] | None:
    """What the wizard saved, without the key (``has_key`` says whether one is stored)."""
    folder = Path(data_dir) / FOLDER
    try:
        settings = json.loads((folder / SETTINGS).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(settings, dict):
        return None
    return {"provider": str(settings.get("provider") or ""), "model": str(settings.get("model") or ""),
            "base_url": str(settings.get("base_url") or ""), "has_key": "yes" if (folder / KEY).is_file() else ""}


def load(config: Config) -> LLMConfig | None:
    """The model the wizard saved, as the ``llm`` section to run with, when config.yaml and the
    environment name none; None otherwise (or when nothing usable is saved: logged)."""
    if not needs_setup(config.llm):
        return None
    data_dir = Path(config.data_dir)
    settings = stored(data_dir)
    if settings is None:
        return None
    key = ""
    if settings["has_key"]:
        from cryptography.fernet import InvalidToken

        try:
            key = data_dir_fernet(data_dir).decrypt((data_dir / FOLDER / KEY).read_bytes()).decode()
        except (InvalidToken, OSError, ValueError) as exc:
            log.warning("the model set up in the browser cannot be read (%s): set it up again", exc)
            return None
    try:
        return candidate(config, provider=settings["provider"], model=settings["model"],  # type: ignore[arg-type]
                         base_url=settings["base_url"], api_key=key)  # fmt: skip
    except SetupError as exc:
        log.warning("the model set up in the browser is not valid any more (%s): set it up again", exc)
        return None
