"""Configuration: YAML + environment -> validated pydantic models.

Unknown keys are rejected everywhere (``extra="forbid"``) and every problem is reported at once, so
an operator fixes a config in one round trip. Secrets never need to be in the file: any string may be
``${NAME}`` / ``${NAME:-default}`` or a mapping ``{"$env": NAME}``, and ``KITH__SECTION__KEY``
environment variables override file values.

This module holds the host's own sections and places the others. Settings owned by one stage live
next to it (``gateway/memory/settings.py``, ``gateway/memory/background/settings.py``,
``gateway/memory/hygiene/settings.py``, ``gateway/mcp/settings.py``); each ``channels.<name>`` section
is declared by the plugin that provides the channel and validated with its model (``gateway.channels``;
the built-in ones are in ``adapters/``); ``extensions.<name>`` belongs to a third-party plugin. Every
field typed ``ModelRole`` (``gateway.configtypes``), wherever it is, must name a configured role.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, SerializeAsAny, field_validator, model_validator

from gateway.channels import Channels
from gateway.configtypes import ROLE_NAME, Section
from gateway.configtypes import ConfigError as ConfigError  # public here: plugins raise gateway.config.ConfigError
from gateway.mcp.settings import McpConfig
from gateway.memory.background.settings import BackgroundConfig
from gateway.memory.settings import MemoryConfig
from gateway.tool_settings import ToolsConfig

# Pillow's Image.MAX_IMAGE_PIXELS as kith sets it (gateway/media/images.py): media.max_pixels stays under it.
PILLOW_MAX_PIXELS = 89_478_485


# --------------------------------------------------------------------------------------------- core


class RateLimit(Section):
    """WebSocket limits (docs/protocol.md#limits). Message buckets belong to the user, not the
    connection, so reconnecting refills nothing; a client over a limit is refused at once."""

    messages_per_minute: int = Field(60, ge=1)  # per user
    burst: int = Field(20, ge=1)
    global_messages_per_minute: int = Field(600, ge=1)  # all WebSocket users together
    global_burst: int = Field(100, ge=1)
    # A client_id seen for the first time creates a user: per client address, and for everyone.
    new_users_per_minute: int = Field(5, ge=1)
    new_users_burst: int = Field(10, ge=1)
    global_new_users_per_minute: int = Field(30, ge=1)
    global_new_users_burst: int = Field(60, ge=1)
    max_concurrent_turns: int = Field(16, ge=1)  # more at once are answered "busy", never queued


_HOST_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$")


def canonical_host(value: str) -> str | None:
    """A host name or IP literal in the one form Host headers are compared in (lowercase; IPv6 in
    brackets, compressed), or None when it is neither. No port, no scheme."""
    v = value.strip().lower()
    if v.startswith("[") and v.endswith("]"):
        v = v[1:-1]
    try:
        ip = ipaddress.ip_address(v)
    except ValueError:
        return v if _HOST_NAME.match(v) and not v.replace(".", "").isdigit() else None
    return f"[{ip.compressed}]" if ip.version == 6 else ip.compressed


def parse_origin(value: str) -> tuple[str, str, int] | None:
    """``scheme://host[:port]`` -> (scheme, canonical host, port with the scheme's default filled in),
    None for anything else (a path, user info, ``null``, another scheme)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    if not parts.netloc or "@" in parts.netloc or parts.hostname is None:
        return None
    host = canonical_host(parts.hostname)
    if host is None:
        return None
    return scheme, host, port if port is not None else (443 if scheme == "https" else 80)


def _refuse_unparsed(values: list[str], parse: Callable[[str], object], want: str) -> None:
    """One error naming every value ``parse`` rejects (returns None for): all fixed in one round trip."""
    bad = [v for v in values if parse(v) is None]
    if bad:
        raise ValueError(f"want {want}, got {bad}")


class ServerConfig(Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    token: SecretStr | None = None
    # Host names (or IP addresses) this server answers to besides localhost, 127.0.0.1 and [::1]:
    # the name of a reverse proxy in front of it, a LAN address. Every other Host header is refused
    # (DNS rebinding, docs/security.md#host-and-origin).
    public_names: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    # Where people reach the web app, e.g. https://kith.example.org (behind a proxy): sign-in links use
    # it, and its host and origin count as public_names and allowed_origins (docs/security.md#sign-in).
    public_url: str | None = None
    max_frame_bytes: int = Field(64 * 1024, ge=1024)
    rate_limit: RateLimit = Field(default_factory=RateLimit)
    # On loopback without a token, every local browser and `kith chat` is the one local owner; false: each
    # browser or terminal is a person of its own (docs/web.md#one-owner).
    local_owner: bool = True

    @field_validator("public_names")
    @classmethod
    def _names_are_hosts(cls, v: list[str]) -> list[str]:
        _refuse_unparsed(v, canonical_host, "host names or IP addresses without scheme or port")
        return [canonical_host(n) or n for n in v]

    @field_validator("allowed_origins")
    @classmethod
    def _origins_are_origins(cls, v: list[str]) -> list[str]:
        _refuse_unparsed(v, parse_origin, "origins like https://chat.example.org or http://localhost:3000")
        return v

    @field_validator("public_url")
    @classmethod
    def _public_url_is_origin(cls, v: str | None) -> str | None:
        if v is None:
            return None
        v = v.rstrip("/")
        _refuse_unparsed([v], parse_origin, "an origin like https://kith.example.org (scheme, host, port only)")
        return v

    @model_validator(mode="after")
    def _public_url_is_served(self) -> ServerConfig:
        parsed = parse_origin(self.public_url) if self.public_url else None
        if parsed is not None:
            if not is_loopback_host(parsed[1]) and parsed[1] not in self.public_names:
                self.public_names.append(parsed[1])
            if self.public_url not in self.allowed_origins:
                self.allowed_origins.append(str(self.public_url))
        return self

    def is_loopback(self) -> bool:
        return is_loopback_host(self.host)


def is_loopback_host(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


BUILTIN_ROLES = ("main", "cheap", "vision", "transcription")
ProviderName = Literal["anthropic", "openai", "echo"]
LOCAL_REMOVED = (
    "provider 'local' was removed (it never shipped a working install): run the model in a llama.cpp "
    "server, Ollama, vLLM or LM Studio and use `provider: openai` with `base_url` pointing at it, "
    "e.g. http://127.0.0.1:11434/v1 for Ollama (docs/models.md)"
)


def model_server_url(value: str | None) -> str | None:
    """``llm.base_url`` (and a role's): an http(s) URL with a host, as the providers' HTTP client
    parses it; anything else would fail only later, at the first call."""
    if value is None:
        return None
    from urllib.parse import urlsplit

    import httpx  # the client under both SDKs: what it refuses, the provider cannot use

    want = "want an http:// or https:// URL with a host, e.g. http://127.0.0.1:11434/v1"
    if not value.isprintable() or any(ch.isspace() for ch in value):
        raise ValueError(f"the URL holds spaces or control characters ({want})")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port out of range raises here)
        httpx.URL(value)
    except (ValueError, httpx.InvalidURL) as exc:
        raise ValueError(f"not a valid URL: {exc} ({want})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(want)
    return value


class Capabilities(Section):
    """What a model can take. ``vision: false`` sends images as a short note instead; ``tools: false``
    never offers tools; ``structured_output: false`` never asks for a JSON schema; ``context_tokens``
    0 = the provider's default (docs/models.md)."""

    vision: bool = True
    tools: bool = True
    # JSON-schema answers (OpenAI-compatible ``response_format``, Anthropic a forced tool call) for the
    # memory stages that parse JSON; false, or a server that refuses it, and they parse the text.
    structured_output: bool = True
    context_tokens: int = Field(0, ge=0)


class Prices(Section):
    """US dollars per million tokens, for `kith usage` and the daily budget (0 = not counted)."""

    input_per_mtok: float = Field(0.0, ge=0)
    output_per_mtok: float = Field(0.0, ge=0)


class RoleConfig(Section):
    """One model role under ``llm.roles``; unset fields come from ``llm``. A role on another provider
    than ``llm`` inherits neither its key, URL, headers nor prices (a key is never sent elsewhere)."""

    provider: ProviderName | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    base_url: str | None = None
    headers: dict[str, SecretStr] | None = None
    max_tokens: int | None = Field(None, ge=1, le=64000)
    timeout_s: float | None = Field(None, gt=0)
    max_retries: int | None = Field(None, ge=0, le=10)
    capabilities: Capabilities | None = None
    prices: Prices | None = None

    @field_validator("provider", mode="before")
    @classmethod
    def _no_local(cls, v: Any) -> Any:
        if v == "local":
            raise ValueError(LOCAL_REMOVED)
        return v

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        return model_server_url(v)


class LLMConfig(Section):
    provider: ProviderName = "anthropic"
    api_key: SecretStr | None = None
    base_url: str | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)  # extra HTTP headers (OpenRouter, proxies)
    model: str = "claude-sonnet-5"
    cheap_model: str = "claude-haiku-5-5"
    max_tokens: int = Field(1024, ge=1, le=64000)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    prompt_caching: bool = True
    max_tool_rounds: int = Field(4, ge=0, le=20)  # tool calls per answer are bounded (gateway/tools.py)
    capabilities: Capabilities = Field(default_factory=Capabilities)
    prices: Prices = Field(default_factory=Prices)
    # Per person and UTC day, in US dollars: past it background jobs stop until tomorrow (chat goes on).
    daily_budget_usd: float = Field(0.0, ge=0)  # 0 = no budget
    roles: dict[str, RoleConfig] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _removed_local(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if data.get("provider") == "local":
                raise ValueError(LOCAL_REMOVED)
            if "local_model_path" in data:
                if data["local_model_path"] not in (None, ""):
                    raise ValueError(f"local_model_path: {LOCAL_REMOVED}")
                data = {k: v for k, v in data.items() if k != "local_model_path"}
        return data

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        return model_server_url(v)

    @field_validator("roles")
    @classmethod
    def _role_names(cls, v: dict[str, RoleConfig]) -> dict[str, RoleConfig]:
        for name in v:
            if name == "main":
                raise ValueError("'main' is `llm` itself: set its fields on `llm`, not under roles")
            if not re.match(ROLE_NAME, name):
                raise ValueError(f"role name {name!r} must match {ROLE_NAME}")
        return v

    def role_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*BUILTIN_ROLES, *self.roles)))

    def role(self, name: str) -> LLMConfig:
        """The effective settings of role ``name``: ``main`` is ``llm``; ``cheap`` defaults to ``llm``
        with ``cheap_model``; ``vision`` and ``transcription`` default to ``llm``. KeyError if unknown."""
        if name == "main":
            return self
        role = self.roles.get(name)
        if role is None:
            if name == "cheap":
                return self.model_copy(update={"model": self._cheap_default(), "roles": {}})
            if name in BUILTIN_ROLES:
                return self.model_copy(update={"roles": {}})
            raise KeyError(name)
        update: dict[str, Any] = {k: getattr(role, k) for k in role.model_fields_set if getattr(role, k) is not None}
        base = self
        if role.provider is not None and role.provider != self.provider:
            base = self.model_copy(update={"api_key": None, "base_url": None, "headers": {}, "prices": Prices(),
                                           "capabilities": Capabilities()})
        elif name == "cheap" and "model" not in update:
            update["model"] = self._cheap_default()
        return base.model_copy(update={**update, "roles": {}})

    def _cheap_default(self) -> str:
        # cheap_model names an Anthropic model unless set: another provider's cheap role is its main model.
        if self.provider == "anthropic" or "cheap_model" in self.model_fields_set:
            return self.cheap_model
        return self.model


class SessionsConfig(Section):
    idle_minutes: float = Field(240, gt=0)
    history_turns: int = Field(20, ge=0, le=500)
    # Compaction: when the live (not yet compacted) history passes this many tokens, or would outgrow
    # ``history_turns``, a job summarises the older turns into working memory (0 = never).
    compact_after_tokens: int = Field(3000, ge=0)
    compact_keep_turns: int = Field(4, ge=1, le=100)  # newest exchanges kept verbatim


class IdentityLink(Section):
    user: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    accounts: list[str] = Field(min_length=1)

    @field_validator("accounts")
    @classmethod
    def _accounts_have_channel(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if ":" not in a or not a.split(":", 1)[0] or not a.split(":", 1)[1]]
        if bad:
            raise ValueError(f"accounts must look like 'channel:account_id', got {bad}")
        return v


class IdentityConfig(Section):
    scope: Literal["user", "channel"] = "user"
    channel_scope: dict[str, Literal["user", "channel"]] = Field(default_factory=dict)
    link_code_ttl_s: int = Field(600, ge=30, le=86400)
    offer_timezone: bool = True  # a person's first reply says which time zone kith assumed (/tz to change)

    def scope_for(self, channel: str) -> str:
        return self.channel_scope.get(channel, self.scope)


class PluginsConfig(Section):
    modules: list[str] = Field(default_factory=list)
    allow: list[str] | None = None  # None = everything not denied
    deny: list[str] = Field(default_factory=list)
    hook_timeout_s: float = Field(5.0, gt=0)
    entry_points: bool = True


def plugin_allowed(name: str, cfg: PluginsConfig) -> bool:
    """Whether the allow/deny lists let plugin ``name`` (module or entry-point name) load."""
    if name in cfg.deny:
        return False
    return cfg.allow is None or name in cfg.allow


class ContextConfig(Section):
    budget_tokens: int = Field(6000, ge=200)
    default_tier: int = Field(2, ge=1, le=4)
    # Per channel ("telegram") and per conversation ("telegram:-100123"); a request's own tier wins
    # over both (gateway/turn/tiers.py).
    channel_tier: dict[str, int] = Field(default_factory=dict)
    conversation_tier: dict[str, int] = Field(default_factory=dict)

    @field_validator("channel_tier", "conversation_tier")
    @classmethod
    def _tiers_in_range(cls, v: dict[str, int]) -> dict[str, int]:
        bad = {k: t for k, t in v.items() if not 1 <= t <= 4}
        if bad:
            raise ValueError(f"tiers must be 1-4, got {bad}")
        return v


PERSONA_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
PersonaName = Annotated[str, Field(pattern=PERSONA_NAME)]


class PersonasConfig(Section):
    """Which persona (``<data_dir>/personas/<name>/``) speaks where; see docs/personas.md.

    A session takes its persona when it starts. In a direct conversation the person's own choice
    (``/persona``, per conversation, then their default) comes first; then the conversation's
    (``"<channel>:<conversation id>"``), the person's (``user_defaults``), the channel's, ``default``
    (gateway/personas/choice.py). Personas named here that do not exist yet are created from
    ``template`` at startup.
    """

    default: PersonaName = "kith"
    channels: dict[str, PersonaName] = Field(default_factory=dict)
    conversations: dict[str, PersonaName] = Field(default_factory=dict)
    template: str = "default"  # a shipped template (gateway/personas/templates/) or an existing persona
    # Per person (user id): the operator's default persona, and which personas they may choose with
    # /persona (absent: every persona on disk). A person's own choice wins over the defaults.
    user_defaults: dict[str, PersonaName] = Field(default_factory=dict)
    user_personas: dict[str, list[PersonaName]] = Field(default_factory=dict)
    # Per persona: false leaves the date and time out of its system block (a persona that must not
    # see the date, e.g. a fictional character or a reproducible test persona). Absent: true.
    inject_datetime: dict[PersonaName, bool] = Field(default_factory=dict)
    # How many personas of their own a person may make with /setup persona (0: none); a person the
    # operator lists in user_personas cannot make any (the operator's list still decides).
    own_max: int = Field(3, ge=0, le=50)

    def for_conversation(self, channel: str, conversation_key: str) -> str:
        return self.conversations.get(conversation_key) or self.channels.get(channel) or self.default

    def names(self) -> list[str]:
        return sorted({self.default, *self.channels.values(), *self.conversations.values(),
                       *self.user_defaults.values(), *(n for names in self.user_personas.values() for n in names)})


# -------------------------------------------------------------------------------------------- state


class StateConfig(Section):
    """Where kith keeps its tables (docs/configuration.md#state-sqlite-or-postgresql,
    docs/architecture.md#storage)."""

    # None = the SQLite file <data_dir>/state.sqlite; "postgresql://user:pass@host:5432/db" = PostgreSQL
    url: SecretStr | None = None
    pool_size: int = Field(16, ge=2, le=512)  # PostgreSQL connections per process, at most
    # <data_dir>/turns.spool, allocated while there is room: answered turns the transcript cannot take
    # (a full disk) wait there to be written back (docs/security.md, "Disk full"); 0 = none
    spool_mb: int = Field(4, ge=0, le=1024)

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and v.get_secret_value().split(":", 1)[0] not in ("postgresql", "postgres"):
            raise ValueError("state.url takes a postgresql:// URL (unset: the SQLite file in data_dir)")
        return v


# ---------------------------------------------------------------------------------------------- bus


class BusConfig(Section):
    """Job bus (see docs/jobs.md). Redis >= 6.2; no ``url`` = private embedded server."""

    url: SecretStr | None = None  # None = private embedded redis-server under <data_dir>/redis
    # Sentinel: master name + "host:port" sentinels; the master's password/TLS come from ``url``
    # (e.g. ``rediss://:secret@/0``) when given, the sentinels' own password from sentinel_password.
    sentinel_master: str | None = None
    sentinels: list[str] = Field(default_factory=list)
    sentinel_password: SecretStr | None = None
    prefix: str = Field("kith", pattern=r"^[A-Za-z0-9_.-]{1,32}$")  # key namespace on a shared server
    concurrency: int = Field(8, ge=1, le=512)
    max_tries: int = Field(5, ge=1)
    claim_idle_ms: int = Field(30000, ge=100)
    heartbeat_ms: int | None = Field(None, ge=20)  # None = claim_idle_ms / 3
    default_timeout_s: float = Field(300.0, gt=0)
    retry_backoff_s: float = Field(2.0, ge=0)  # first retry delay; doubles per try, jittered
    retry_backoff_max_s: float = Field(600.0, ge=0)
    shutdown_grace_s: float = Field(30.0, ge=0)  # how long stop waits for running jobs
    max_payload_bytes: int = Field(8192, ge=256)  # payloads carry ids, not message text
    appendfsync: Literal["everysec", "always"] = "everysec"  # embedded server only
    workers_in_process: bool = True


class ClusterConfig(Section):
    """Several gateway nodes on one Redis and one state database (docs/architecture.md#several-nodes).

    Off (one node): the daemon locks its whole data_dir and serialises turns in-process. On: every
    node needs ``bus.url`` (or Sentinel) pointing at the shared Redis and ``state.url`` at the shared
    PostgreSQL; each node locks only ``<data_dir>/nodes/<node_id>/``."""

    enabled: bool = False
    node_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")  # None = <hostname>-<pid>
    lease_ttl_s: float = Field(10.0, ge=1, le=300)  # the scheduler role moves within this after a crash
    lock_ttl_s: float = Field(30.0, ge=1, le=3600)  # a dead holder's turn or file lock frees after this
    turn_lock_wait_s: float = Field(300.0, gt=0)  # longest a turn waits for the person's previous one


# --------------------------------------------------------------------------------------- operations


class LoggingConfig(Section):
    """How log lines look (docs/operations.md#logs); the level is ``log_level``."""

    format: Literal["text", "json"] = "text"  # json: one object per line, with the turn id of a turn's lines


class MetricsConfig(Section):
    """``GET /metrics`` in the Prometheus text format (docs/operations.md#metrics)."""

    enabled: bool = True
    # A scrape credential of its own (Authorization: Bearer), so Prometheus never holds the operator
    # token. Without server.token /metrics is open on loopback unless this is set; with server.token
    # (reachable beyond loopback) it needs this token or the operator credential.
    token: SecretStr | None = None


class DeliveryConfig(Section):
    """The delivery outbox (docs/proactive.md#delivery-guarantees)."""

    # Sent and failed rows are deleted this many days after their last attempt (0 = kept forever). A
    # row is what makes a fired occurrence deliver once; the schedule records it in the person's file
    # within seconds, so the retention only has to outlast a crash's restart, not the schedule.
    retention_days: float = Field(30.0, ge=0)
    prune_interval_s: float = Field(3600.0, gt=0)  # how often the sweep looks for rows to delete


class MediaConfig(Section):
    """The caps every attachment is held to (docs/media.md#limits); ``gateway.media.limits`` reads them.
    A file over one is refused with a reply naming it and the cap, and nothing of its message is kept."""

    max_bytes: int = Field(20 * 1024 * 1024, ge=1)  # per file, as fetched from the channel or uploaded
    max_files: int = Field(8, ge=1)  # per message (a person may hold twice this in pending uploads)
    # Decoded size of an image, checked from its header (a bomb is refused before a pixel is decoded).
    # Capped by Pillow's own bomb guard, which stays on behind it (gateway/media/images.py).
    max_pixels: int = Field(40_000_000, ge=1, le=PILLOW_MAX_PIXELS)
    image_max_side: int = Field(1568, ge=1)  # longest side sent to the model (what vision models read at full detail)
    max_pages: int = Field(200, ge=1)  # a longer PDF is refused, not read in part
    max_chars: int = Field(60_000, ge=1)  # text kept from one document (the rest is cut, and the cut is said)
    max_unpacked_bytes: int = Field(50 * 1024 * 1024, ge=1)  # the text XML of a .docx/.odt, unzipped (zip bombs)
    extract_timeout_s: float = Field(30.0, gt=0)  # reading one document or image (wall clock), in the sandbox
    # The reader sandbox (gateway/media/sandbox.py, docs/security.md#attachment-sandbox): each file is
    # parsed in a worker process with this much address space (RLIMIT_AS) and CPU time (RLIMIT_CPU).
    read_memory_bytes: int = Field(1024 * 1024 * 1024, ge=128 * 1024 * 1024)
    read_cpu_s: float = Field(20.0, gt=0)
    read_workers: int = Field(2, ge=1, le=32)  # files read at once (worker processes, started on the first file)
    transcribe_timeout_s: float = Field(120.0, gt=0)  # one voice note, by the transcription role
    fetch_timeout_s: float = Field(60.0, gt=0)  # downloading one file from its channel
    upload_ttl_s: float = Field(3600.0, gt=0)  # an upload not used by a message within this is dropped
    # Pending uploads held in memory, for everyone (at least max_bytes: _semantic_problems).
    upload_total_bytes: int = Field(200 * 1024 * 1024, ge=1)
    # Pending uploads of one person (at least max_bytes, at most upload_total_bytes: _semantic_problems),
    # so one person cannot use up everyone's budget (issue 27).
    upload_person_bytes: int = Field(48 * 1024 * 1024, ge=1)


class SpeechConfig(Section):
    """Voice replies (docs/channels.md#voice-replies), spoken by the ``speech`` model role
    (``llm.roles.speech``: an OpenAI-compatible ``/v1/audio/speech``). Which replies are spoken is each
    channel's ``voice_replies``; these are the voice and the caps every spoken reply is held to."""

    voice: str = Field("alloy", min_length=1, max_length=64)  # the server's voice name (kokoro: af_bella, ...)
    speed: float = Field(1.0, ge=0.25, le=4.0)
    # A longer reply is not spoken (its text goes out as always): minutes of audio nobody listens to.
    max_chars: int = Field(1500, ge=1, le=4096)  # 4096: what /v1/audio/speech takes at most
    max_bytes: int = Field(8 * 1024 * 1024, ge=1024)  # audio the server may send back (Discord's smallest upload cap)
    timeout_s: float = Field(60.0, gt=0)  # one reply's synthesis, wall clock; past it the text goes alone


# --------------------------------------------------------------------------------------------- root


class Config(Section):
    data_dir: Path = Path("./kith-data")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    timezone: str = "UTC"
    personas: PersonasConfig = Field(default_factory=PersonasConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    identity: IdentityConfig = Field(default_factory=IdentityConfig)
    identity_links: list[IdentityLink] = Field(default_factory=list)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    bus: BusConfig = Field(default_factory=BusConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    background: BackgroundConfig = Field(default_factory=BackgroundConfig)
    # One section per channel, declared by the plugin providing it (gateway.channels; set by parse_config).
    # SerializeAsAny: dumped as the model it was read with, not as the empty base.
    channels: SerializeAsAny[Channels] = Field(default_factory=Channels)
    mcp: McpConfig = Field(default_factory=McpConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    speech: SpeechConfig = Field(default_factory=SpeechConfig)  # voice replies (docs/channels.md)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)  # web fetch, web search, calendar (docs/tools.md)
    # Sections owned by third-party plugins, validated by them in gateway_configure.
    extensions: dict[str, Any] = Field(default_factory=dict)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown timezone {v!r}") from exc
        return v
