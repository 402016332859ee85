"""``kith context --user U --channel C MESSAGE``: exactly what the model would receive, and why.

Asks the running daemon (``POST /api/users/{uid}/context``: it holds the live memory index); with no daemon running
it opens the data directory itself, read-only (no jobs, no writes). Prints every system-prompt
section with its token count, where the prompt cache ends, what the budgeter trimmed, the live
history and the tools offered. ``--json`` prints the raw explanation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from gateway.cli.common import load_or_exit
from gateway.cli.daemon import DaemonError, ask_daemon, user_path
from gateway.config import Config
from gateway.memory.search.readiness import KEYWORD_ONLY


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("context", help="show the prompt the model would get for a message (section by section)")
    p.add_argument("--user", required=True, help="user id (users/<id>/)")
    p.add_argument("--channel", default="websocket", help="channel the message arrives on (default: websocket)")
    p.add_argument("--conversation", default="", help="group conversation id (default: a direct conversation)")
    p.add_argument("--tier", type=int, choices=(1, 2, 3, 4), help="context tier (default: as configured)")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.add_argument("--local", action="store_true", help="don't ask the daemon; open the data directory here")
    p.add_argument("message", help="the message text")
    p.set_defaults(func=run)


async def locally(config: Config, body: dict[str, Any]) -> dict[str, Any]:
    from gateway.app import Gateway
    from gateway.turn.explain import explain

    async with Gateway(config, serve_http=False, supervise=False, run_jobs=False) as gw:
        return await explain(gw, user_id=body["user"], channel=body["channel"], text=body["message"],
                             conversation=body["conversation"], tier=body["tier"])


async def from_daemon(config: Config, body: dict[str, Any]) -> dict[str, Any] | None:
    """The daemon's preview (None: no daemon serves this data dir); an unknown user is told as locally."""
    from gateway.turn.explain import ExplainError

    preview = {"message": body["message"], "channel": body["channel"], "conversation": body["conversation"] or "",
               "tier": body["tier"]}  # fmt: skip
    try:
        return await ask_daemon(config, "POST", user_path(body["user"], "/context"), preview)
    except DaemonError as exc:
        if exc.status == 404:
            raise ExplainError(f"unknown user {body['user']!r} (see `kith memory stats` or the users table)") from None
        raise


def render(x: dict[str, Any]) -> str:
    where = f"{x['channel']}" + (f" group {x['conversation']}" if x["conversation"] else " (direct)")
    session = x["session"]
    out = [
        f"user {x['user']} on {where}, tier {x['tier']}, session {session['id'][:16]}"
        + (" (new: session-start injection applies)" if session["new"] else "") + (" [OTR]" if session["otr"] else ""),
        f"system prompt: {x['system_tokens']} tokens of {x['budget_tokens']} budget; "
        f"history: {len(x['messages'])} messages, {x['message_tokens']} tokens; tools: {', '.join(x['tools']) or '-'}",
    ]
    if f := x.get("recall_filter"):
        out.append(f"recall filter: {f['outcome']} in {f['latency_ms']:.0f} ms ({f['backend'] or 'no model'}); "
                   f"kept {len(f['kept'])} of {f['candidates']}: {', '.join(f['kept']) or '-'}"
                   + (f" [{f['reason']}]" if f["reason"] else "")
                   + (f" (after a literal search for {f['grep']!r})" if f.get("grep") else ""))
    if skipped := x.get("recall_skipped"):
        # Keyword-only recall ran (no index): it is said, but it is not a skipped recall.
        out.append(f"recall: {skipped}" if str(skipped).startswith(KEYWORD_ONLY) else f"recall skipped: {skipped}")
    out.append("")
    cached = [s for s in x["sections"] if s["cached"]]
    for i, s in enumerate(x["sections"]):
        flags = [s["stability"]]
        if s["protected"]:
            flags.append("protected")
        if s["trimmed_from"] is not None:
            flags.append(f"trimmed from {s['trimmed_from']}")
        out.append(f"=== {s['title'] or s['source']}  [{s['source']}] {s['tokens']} tokens ({', '.join(flags)})")
        out.append(s["text"])
        out.append("")
        if cached and i == len(cached) - 1:
            out.append("----- prompt cache breakpoint: everything above is cached across turns -----")
            out.append("")
    dropped = [t for t in x["trims"] if t["after"] == 0]
    if dropped:
        out.append("dropped to fit the budget: " + ", ".join(t["source"] for t in dropped))
    out.append("=== messages")
    for m in x["messages"]:
        text = m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        out.append(f"[{m['role']}, {m['tokens']} tokens] {text}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    config = load_or_exit(args)
    body = {"user": args.user, "channel": args.channel, "conversation": args.conversation, "message": args.message,
            "tier": args.tier}

    async def go() -> dict[str, Any]:
        answer = None if args.local else await from_daemon(config, body)
        return answer if answer is not None else await locally(config, body)

    from gateway.turn.explain import ExplainError

    try:
        result = asyncio.run(go())
    except (ExplainError, DaemonError) as exc:
        print(f"kith context: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1, ensure_ascii=False) if args.json else render(result))
    return 0
