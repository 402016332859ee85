"""Reading a config: the YAML file, ``$env``/``${VAR}`` references, ``KITH__`` overrides, the channel
sections the plugins declare, and every problem at once (``ConfigError``).

Apart from ``gateway/config.py`` (the models) because reading ``channels`` loads the plugins of the
config (``gateway.plugins.declared_channels``), and the plugin loader sits above the models: with the
two in one module every module that names a config setting was in one import cycle with the plugin
host (tests/core/test_import_cycles.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gateway.channels import Channels, channel_problems, channels_model
from gateway.config import Config, PluginsConfig
from gateway.configtypes import ConfigError, model_roles
from gateway.plugins import declared_channels

ENV_PREFIX = "KITH__"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")



def _resolve_env(node: Any, path: str, env: Mapping[str, str], problems: list[str]) -> Any:
    if isinstance(node, dict):
        if set(node) == {"$env"}:
            name = node["$env"]
            if not isinstance(name, str) or name not in env:
                problems.append(f"{path or '<root>'}: environment variable {name!r} is not set")
                return None
            return env[name]
        return {k: _resolve_env(v, f"{path}.{k}" if path else str(k), env, problems) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve_env(v, f"{path}[{i}]", env, problems) for i, v in enumerate(node)]
    if isinstance(node, str) and "${" in node:

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            problems.append(f"{path}: environment variable {name!r} is not set")
            return ""

        return _ENV_REF.sub(sub, node)
    return node


def _apply_env_overrides(data: dict[str, Any], env: Mapping[str, str]) -> None:
    """``KITH__LLM__API_KEY=...`` sets ``llm.api_key``; values are parsed as YAML scalars."""
    for key, value in env.items():
        if not key.startswith(ENV_PREFIX):
            continue
        parts = [p.lower() for p in key[len(ENV_PREFIX) :].split("__") if p]
        if not parts:
            continue
        node = data
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                node[part] = nxt
            node = nxt
        parsed = yaml.safe_load(value) if value else value
        node[parts[-1]] = parsed if isinstance(parsed, (int, float, bool, list)) else value


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _role_problems(cfg: Config) -> list[str]:
    """Every field typed ``ModelRole``, in any section (a stage's, a channel's), names a role that exists."""
    known = cfg.llm.role_names()
    return [f"{path}: unknown model role {role!r} (known: {', '.join(known)}; add it under llm.roles)"
            for path, role in model_roles(cfg) if role not in known]


def _semantic_problems(cfg: Config) -> list[str]:
    problems = _role_problems(cfg)
    if not cfg.server.is_loopback() and cfg.server.token is None:
        problems.append(
            f"server.token: required when server.host ({cfg.server.host}) is not loopback; "
            "set it with ${KITH_TOKEN} or KITH__SERVER__TOKEN"
        )
    problems.extend(channel_problems(cfg))
    if cfg.cluster.enabled and cfg.bus.url is None and not cfg.bus.sentinel_master:
        problems.append("cluster.enabled: every node needs the shared Redis: set bus.url (or bus.sentinel_master);"
                        " the embedded server belongs to one node")
    media = cfg.media
    if media.upload_total_bytes < media.max_bytes:
        problems.append(f"media.upload_total_bytes: {media.upload_total_bytes:,} is below media.max_bytes "
                        f"({media.max_bytes:,}): a file at the size cap could never be uploaded")
    if media.upload_person_bytes < media.max_bytes:
        problems.append(f"media.upload_person_bytes: {media.upload_person_bytes:,} is below media.max_bytes "
                        f"({media.max_bytes:,}): a file at the size cap could never be uploaded")
    elif media.upload_person_bytes > media.upload_total_bytes:
        problems.append(f"media.upload_person_bytes: {media.upload_person_bytes:,} is above "
                        f"media.upload_total_bytes ({media.upload_total_bytes:,}): one person could use up "
                        "everyone's upload budget")
    seen: dict[str, str] = {}
    for i, link in enumerate(cfg.identity_links):
        for acct in link.accounts:
            if cfg.identity.scope_for(acct.split(":", 1)[0]) == "channel":
                problems.append(f"identity_links[{i}]: {acct!r} is on a channel with identity scope 'channel'")
            if acct in seen and seen[acct] != link.user:
                problems.append(
                    f"identity_links[{i}]: account {acct!r} is linked to both {seen[acct]!r} and {link.user!r}"
                )
            seen[acct] = link.user
    return problems


def _problem(err: ErrorDetails, prefix: tuple[str, ...] = ()) -> str:
    msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
    return f"{_format_loc((*prefix, *err['loc']))}: {msg}"


def _read_channels(raw: Any, plugins_raw: Any, extra_plugins: Sequence[Any]) -> tuple[Channels | None, list[str]]:
    """``channels`` validated with the models its plugins declare (``gateway_register_channels``).

    The plugins are those the ``plugins`` section loads (its own problems are the host's to report).
    A plugin that fails to load is named only when some section is left undeclared: that is when it
    matters here, and ``gateway.plugins.build_plugin_host`` reports it at start-up either way."""
    try:
        plugins = PluginsConfig.model_validate(plugins_raw if plugins_raw is not None else {})
    except ValidationError:
        plugins = PluginsConfig()
    declared, load_problems = declared_channels(plugins, extra_plugins=extra_plugins)
    problems = [f"channels: {p}" for p in declared.problems]
    try:
        channels = channels_model(declared).model_validate(raw)
    except ValidationError as exc:
        undeclared = False
        for err in exc.errors():
            if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
                undeclared = True
                problems.append(f"channels.{err['loc'][0]}: unknown key (no plugin declares that channel; "
                                f"declared: {', '.join(sorted(declared)) or 'none'})")
            else:
                problems.append(_problem(err, ("channels",)))
        if undeclared:
            problems.extend(load_problems)
        return None, problems
    # A bad declaration (a name taken twice) is reported; checks that need the sections wait for its fix.
    return (None if declared.problems else channels), problems


def parse_config(data: Any, *, env: Mapping[str, str] | None = None, source: str = "",
                 plugins: Sequence[Any] = ()) -> Config:  # fmt: skip
    """Validate ``data`` (a parsed YAML document) into a ``Config``; ``ConfigError`` lists every problem.

    ``plugins``: plugin objects beyond those the config itself loads (``Gateway(plugins=...)`` in
    tests), so that the channel sections they declare are known."""
    env = os.environ if env is None else env
    problems: list[str] = []
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([f"top level must be a mapping, got {type(data).__name__}"], source)
    data = _resolve_env(data, "", env, problems)
    _apply_env_overrides(data, env)
    llm = data.get("llm") if isinstance(data.get("llm"), dict) else None
    if "ANTHROPIC_API_KEY" in env and (llm is None or not llm.get("api_key")) and (
        llm is None or llm.get("provider", "anthropic") == "anthropic"
    ):
        data.setdefault("llm", {})
        if isinstance(data["llm"], dict):
            data["llm"]["api_key"] = env["ANTHROPIC_API_KEY"]
    llm = data.get("llm") if isinstance(data.get("llm"), dict) else None
    if "OPENAI_API_KEY" in env and llm is not None and llm.get("provider") == "openai" and not llm.get("api_key") \
            and not llm.get("base_url"):
        llm["api_key"] = env["OPENAI_API_KEY"]  # only for OpenAI itself: a base_url names another server
    channels, channel_problems_found = _read_channels(data.pop("channels", {}), data.get("plugins"), plugins)
    cfg: Config | None = None
    try:
        cfg = Config.model_validate({**data, "channels": channels} if channels is not None else data)
    except ValidationError as exc:
        problems.extend(_problem(err) for err in exc.errors())
    problems.extend(channel_problems_found)
    if cfg is not None and channels is not None:
        problems.extend(_semantic_problems(cfg))
    if problems:
        raise ConfigError(problems, source)
    assert cfg is not None
    return cfg


def load_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None,
                plugins: Sequence[Any] = ()) -> Config:  # fmt: skip
    """Load ``path`` (or defaults when None). Raises ConfigError listing every problem."""
    if path is None:
        return parse_config({}, env=env, plugins=plugins)
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read {p}: {exc.strerror}"], str(p)) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"YAML syntax error: {exc}"], str(p)) from exc
    return parse_config(data, env=env, source=str(p), plugins=plugins)
