"""``kith bench turn --first-prompt``: the prompt tokens of a person's first turn with every tool connected.

One new person (the default tier) whose gateway has web fetch on and search configured, and who has
connected a calendar and a mailbox (their encrypted credentials are stored as ``/calendar connect`` and
``/mail connect`` would; nothing is contacted, since the echo model calls no tool), sends one message.
What the first model call carries is counted with ``estimate_tokens`` (about 4 characters a token):
the system sections, the messages and the tool schemas (name, description and the input schema as
JSON, as the provider sends them). The figures per tool say where the tokens go (docs/tools.md).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.configread import parse_config
from gateway.hookspecs import hookimpl

MESSAGE = "What's on my calendar tomorrow, and is there mail from Priya?"


def tool_chars(spec: Any) -> int:
    return len(spec.name) + len(spec.description) + len(json.dumps(dict(spec.input_schema), separators=(",", ":")))


class _FirstPrompt:
    def __init__(self) -> None:
        self.requests: list[Any] = []

    @hookimpl
    def gateway_before_llm_call(self, request: Any) -> None:
        self.requests.append(request)


async def run_first_prompt(message: str = MESSAGE) -> dict[str, Any]:
    from gateway.turn.budget import estimate_tokens, render_section
    from gateway.types import InboundMessage
    from plugins.tools.credentials import CredentialStore

    probe = _FirstPrompt()
    with tempfile.TemporaryDirectory(prefix="kith-bench-") as tmp:
        cfg = parse_config({
            "data_dir": str(Path(tmp) / "data"), "llm": {"provider": "echo"}, "server": {"port": 0},
            "plugins": {"entry_points": False}, "log_level": "WARNING",
            "identity_links": [{"user": "measured", "accounts": ["websocket:sam"]}],
            "tools": {"web_fetch": {"enabled": True}, "calendar": {"enabled": True}, "mail": {"enabled": True},
                      "web_search": {"backend": "searxng", "searxng_url": "http://127.0.0.1:9"}},
        }, env={})
        async with Gateway(cfg, plugins=(probe,), entry_points=False, serve_http=False) as gw:
            secrets = CredentialStore(gw.config.data_dir)
            secrets.put("measured", "calendar", {"url": "https://dav.example.org/cal/", "username": "sam",
                                                 "password": "not-used"})  # fmt: skip
            secrets.put("measured", "mail", {"imap": "imap.example.org", "smtp": "smtp.example.org",
                                             "username": "sam@example.org", "password": "not-used"})  # fmt: skip
            await gw.handle_inbound(InboundMessage(channel="websocket", account_id="sam", text=message, trusted=True,
                                                   display_name="Sam"))  # fmt: skip
            await gw.settle(timeout=60)
    if not probe.requests:
        raise SystemExit("bench turn --first-prompt: the turn made no model call")
    request = probe.requests[0]
    system = sum(estimate_tokens(render_section(s)) for s in request.system)
    messages = sum(estimate_tokens(m.content) for m in request.messages)
    per_tool = {t.name: tool_chars(t) for t in request.tools}
    tools = estimate_tokens("x" * sum(per_tool.values()))
    return {"bench": "turn-first-prompt", "prompt_tokens": system + messages + tools, "system_tokens": system,
            "message_tokens": messages, "tool_tokens": tools, "tools": len(per_tool),
            "tool_chars": per_tool}  # fmt: skip
