"""Settings of the tools that reach outside (``tools``): web fetch, web search, calendar, mail, approvals.

Each tool is off until the operator turns it on (or, for search, names a backend): a tool the person
cannot use costs schema tokens on every turn, so none is offered by default (docs/tools.md).
"""

from __future__ import annotations

import ipaddress
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.configtypes import Section


def _http_url(v: str | None) -> str | None:
    if v is not None and urlsplit(v).scheme not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    return v


class WebFetchConfig(Section):
    enabled: bool = False
    max_bytes: int = Field(1_000_000, ge=1024, le=20_000_000)  # body after decompression; more is refused
    max_chars: int = Field(12_000, ge=500, le=16_000)  # extracted text handed to the model
    timeout_s: float = Field(10.0, gt=0, le=60)  # the whole fetch, every redirect included
    max_redirects: int = Field(5, ge=0, le=10)
    # Hosts (``wiki.lan``; ``.lan`` = every subdomain) or IP networks (``10.1.0.0/16``) that may be private:
    # the operator's intranet. Everything else must resolve to public addresses only.
    allow_hosts: list[str] = Field(default_factory=list)
    user_agent: str = "kith-web-fetch/1 (+https://github.com/kith)"

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        return check_hosts(v)


def check_hosts(v: list[str]) -> list[str]:
    """Host names (``.lan`` = its subdomains) and IP networks, lower-cased; anything else is an error."""
    out = []
    for item in v:
        item = item.strip().lower()
        if "/" in item or _is_ip(item):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError as exc:
                raise ValueError(f"{item!r} is not an IP network") from exc
        elif not item or any(c in item for c in " @:/?#"):
            raise ValueError(f"{item!r} is neither a host name nor an IP network")
        out.append(item)
    return out


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


class WebSearchConfig(Section):
    backend: Literal["none", "searxng", "brave"] = "none"
    searxng_url: str | None = None  # the instance's base URL; its JSON format must be enabled
    brave_api_key: SecretStr | None = None
    brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    max_results: int = Field(5, ge=1, le=10)
    timeout_s: float = Field(10.0, gt=0, le=30)

    @field_validator("searxng_url", "brave_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return _http_url(v)

    @model_validator(mode="after")
    def _backend_complete(self) -> WebSearchConfig:
        if self.backend == "searxng" and not self.searxng_url:
            raise ValueError("backend searxng needs searxng_url")
        if self.backend == "brave" and self.brave_api_key is None:
            raise ValueError("backend brave needs brave_api_key")
        return self


class CalendarConfig(Section):
    enabled: bool = False  # offered to a person only once they connected a calendar
    timeout_s: float = Field(20.0, gt=0, le=60)  # one CalDAV exchange
    max_events: int = Field(50, ge=1, le=200)  # listed per call
    briefing: bool = True  # today's events as a briefing section
    # A person's CalDAV URL must resolve to public addresses unless its host or network is listed here.
    allow_hosts: list[str] = Field(default_factory=list)

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        return check_hosts(v)


class MailConfig(Section):
    enabled: bool = False  # offered to a person only once they connected a mailbox (/mail connect)
    timeout_s: float = Field(20.0, gt=0, le=60)  # one IMAP or SMTP session
    max_list: int = Field(20, ge=1, le=50)  # mails listed per call
    max_message_bytes: int = Field(2_000_000, ge=10_000, le=20_000_000)  # a bigger mail is not fetched to be read
    max_chars: int = Field(8_000, ge=500, le=16_000)  # text of one read mail handed to the model
    max_send_chars: int = Field(6_000, ge=100, le=12_000)  # body of a mail the model writes (all in the preview)
    briefing: bool = True  # unread count and the newest senders/subjects as a briefing section
    # A person's IMAP/SMTP host must resolve to public addresses unless its host or network is listed here.
    allow_hosts: list[str] = Field(default_factory=list)

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        return check_hosts(v)


class SkillsConfig(Section):
    enabled: bool = True  # with no skill anywhere, nothing is offered and nothing costs tokens
    dirs: list[str] = Field(default_factory=list)  # the operator's skill folders (each holds <name>/SKILL.md)
    personas: bool = True  # the speaking persona's <data_dir>/personas/<name>/skills/ too
    max_catalogue: int = Field(30, ge=1, le=200)  # skills named in one prompt (their descriptions cost tokens)


class ToolsConfig(Section):
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    calendar: CalendarConfig = Field(default_factory=CalendarConfig)
    mail: MailConfig = Field(default_factory=MailConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    approval_ttl_s: int = Field(600, ge=30, le=86_400)  # a pending approval expires after this
    approval_audit_days: int = Field(90, ge=1, le=3650)  # the approval audit keeps this many days
