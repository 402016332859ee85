"""Built-in plugin: weekly memory hygiene (``memory_hygiene`` job) and ``/tidy`` in chat.

The job runs per person in their own time zone (``background.hygiene.cron``, Sundays 05:00) and only
*proposes* (``gateway.memory.hygiene``); the person lists, accepts and rejects in a direct
conversation, or in the console. Like ``/remember``, ``/tidy`` works only in a direct conversation
(a group would read the person's memory in the proposals) and changes nothing Off-The-Record.

    /tidy                 list the pending proposals, numbered
    /tidy show N          one proposal in full (what it removes, adds, re-points)
    /tidy accept N        apply proposal N (through the guarded store, audited)
    /tidy reject N        drop it (it is not proposed again)
    /tidy run             check now instead of waiting for the week
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.memory.hygiene import proposals as stored
from gateway.memory.hygiene.apply import decide
from gateway.memory.hygiene.proposals import Proposal
from gateway.memory.hygiene.run import run_hygiene
from gateway.turn.command_registry import CommandRegistry
from gateway.types import ConversationKind, Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.plugins.hygiene")
JOB = "memory_hygiene"
HELP = ("/tidy: memory tidy-up proposals (duplicates, conflicts, stale lines, notes to promote, playbooks)\n"
        "/tidy show N, /tidy accept N, /tidy reject N: look at, apply or drop proposal N\n"
        "/tidy run: check my memory of you now")
MAX_DETAIL = 1500


async def hygiene_job(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    user_id = payload.get("user_id")
    if not gw.config.background.hygiene.enabled or not isinstance(user_id, str) or gw.memory is None:
        return
    if gw.state.users.get(user_id) is None:
        return
    await run_hygiene(gw, user_id)


@hookimpl
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    register(hygiene_job, name=JOB, cron=config.background.hygiene.cron, timeout=600, max_tries=3)


@hookimpl
def gateway_register_commands(register: CommandRegistry, config: Config) -> None:
    register("tidy", HELP)


def _line(n: int, p: Proposal) -> str:
    return f"{n}. [{p.kind}] {p.title}"


def listing(items: list[Proposal]) -> str:
    if not items:
        return "Nothing to tidy: no proposals are waiting. (/tidy run checks now.)"
    lines = [f"{len(items)} tidy-up proposal(s) for your memory:"]
    lines += [_line(i, p) for i, p in enumerate(items, 1)]
    lines.append("/tidy show N to see one; /tidy accept N or /tidy reject N to decide.")
    return "\n".join(lines)


def shown(n: int, p: Proposal) -> str:
    files = ", ".join(f"{c.path} ({'delete' if c.after is None else 'new' if not c.before_sha256 else 'edit'})"
                      for c in p.changes)
    detail = p.detail if len(p.detail) <= MAX_DETAIL else p.detail[:MAX_DETAIL] + " ..."
    return f"{_line(n, p)}\n{detail}\nFiles: {files}\n/tidy accept {n} or /tidy reject {n}"


def refusal(gateway: Services, turn: Turn) -> str:
    if gateway.memory is None:
        return "My memory is not running right now."
    if turn.message.kind is ConversationKind.GROUP:
        return "That works only in a direct conversation with me: your memory is private."
    return ""


@hookimpl
async def gateway_handle_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
    if command != "tidy" or turn.user is None:
        return None
    why = refusal(gateway, turn)
    if why:
        return Reply(text=why, notice=True)
    user_id = turn.user.user_id
    store = gateway.memory_store(user_id)
    word, _, rest = args.strip().partition(" ")
    word = word.lower()
    if word in ("", "list"):
        return Reply(text=listing(await asyncio.to_thread(stored.pending, store.root)), notice=True)
    if word == "show":
        items = await asyncio.to_thread(stored.pending, store.root)
        ref = rest.strip()
        if ref.isdigit() and 1 <= int(ref) <= len(items):
            return Reply(text=shown(int(ref), items[int(ref) - 1]), notice=True)
        return Reply(text=f"No proposal {ref!r}. " + listing(items), notice=True)
    if word in ("accept", "reject"):
        if gateway.sessions.is_otr(turn.user, turn.message):
            return Reply(text="Off-The-Record is on: nothing is written to memory. Use /otr off first.", notice=True)
        if not rest.strip():
            return Reply(text=f"Usage: /tidy {word} N (the number /tidy shows)", notice=True)
        result = await decide(gateway, user_id, rest.strip(), accept=word == "accept", actor="person")
        return Reply(text=result.message, notice=True)
    if word == "run":
        report = await run_hygiene(gateway, user_id)
        items = await asyncio.to_thread(stored.pending, store.root)
        return Reply(text=f"Checked: {len(report.added)} new proposal(s).\n" + listing(items), notice=True)
    return Reply(text="Usage: /tidy | /tidy show N | /tidy accept N | /tidy reject N | /tidy run", notice=True)
