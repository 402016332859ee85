"""Built-in plugin: tools the model can use on the speaker's memory.

| tool | tier | writes | what it does |
|---|---|---|---|
| ``memory_search`` | 2 | no | hybrid recall (dense + BM25, recency-weighted) in the speaker's scope |
| ``memory_get`` | 2 | no | read one file (or list a folder) of the speaker's memory root |
| ``follow_links`` | 2 | no | read the files one memory file's Markdown links name (one or two hops, contained) |
| ``reminders`` | 2 | yes | add / list / cancel reminders in ``REMINDERS.md``; a delayed bus job delivers each |
| ``scratchpad`` | 4 | yes | read / write / append / clear ``SCRATCH.md`` |
| ``tasks`` | 4 | yes | add / list / complete / reopen tasks in ``TASKS.json`` |
| ``memory_remember`` | 2 | yes | keep one line in ``REMEMBERED.md`` (``gateway.memory.edit.remember``) |
| ``memory_forget`` | 2 | yes | forget matching lines, facts and index points (``gateway.memory.edit.forget``) |
| ``web_fetch`` | 2 | no | a web page's readable text, SSRF-guarded (``tools.web_fetch.enabled``) |
| ``web_search`` | 2 | no | SearXNG or Brave results (``tools.web_search.backend``) |
| ``calendar_list`` | 2 | no | the person's CalDAV events, in their timezone (once they ``/calendar connect``) |
| ``calendar_change`` | 2 | yes | create, move or cancel an event, after the person's ``/approve`` |
| ``mail_list`` / ``mail_read`` | 2 | no | the person's inbox over IMAP (once they ``/mail connect``) |
| ``mail_draft`` / ``mail_send`` | 2 | yes | a mail into their Drafts; sent over SMTP after their ``/approve`` |
| ``skill`` | 2 | no | a skill's instructions or one of its files, on demand (``gateway.skills``) |

Every tool works on the speaker's own root through the guarded store (containment, size cap, lock,
atomic replace, audit line with ``source="tool:<name>"``, the turn id and ``trust="model"``), so
none is offered in group conversations; the writing ones are not offered Off-The-Record
(``gateway.tools``). The reading tools obey the file tiers too (``gateway.turn.tiers.file_loads``):
at tier 2 ``memory_get`` neither reads nor lists ``SCRATCH.md``, ``TASKS.json`` or ``MEMORY_LONG.md``,
and ``memory_search`` drops hits from them. The file formats (see each tool's module) are plain text a
person can edit by hand.

One module per tool (``memory_search``, ``memory_get``, ``reminders``, ``scratchpad``, ``tasks``, each
with its handler and its ``TOOL`` declaration), ``common`` for what they share; this package is the
plugin (``plugins.tools``) and registers them here, in this order. It may import the host
(``gateway.tools``, ``gateway.turn.tiers``, ``gateway.memory.files``), never another plugin.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import Awaitable
from datetime import datetime
from typing import TYPE_CHECKING

from gateway.approvals import APPROVALS
from gateway.bus.registry import JobRegistry
from gateway.delivery.sections import BriefingSection
from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolRegistry
from gateway.tools import approvals as approval_book
from gateway.turn.command_registry import CommandRegistry
from gateway.types import Reply, Turn
from plugins.tools import (
    approvals,
    calendar_tool,
    follow_links,
    mail_briefing,
    mail_tool,
    memory_forget,
    memory_get,
    memory_remember,
    memory_search,
    reminders,
    scratchpad,
    skill_tool,
    tasks,
    web_fetch,
    web_search,
)

TOOLS: tuple[Tool, ...] = (memory_search.TOOL, memory_get.TOOL, reminders.TOOL, scratchpad.TOOL, tasks.TOOL,
                           memory_remember.TOOL, memory_forget.TOOL, follow_links.TOOL,
                           web_fetch.TOOL, web_search.TOOL, calendar_tool.LIST_TOOL, calendar_tool.CHANGE_TOOL,
                           *mail_tool.TOOLS, skill_tool.TOOL)

if TYPE_CHECKING:
    from gateway.config import Config
    from gateway.services import Services

log = logging.getLogger("kith.tools")


@hookimpl
def gateway_register_tools(register: ToolRegistry) -> None:
    for tool in TOOLS:
        register(tool)


@hookimpl
def gateway_startup(gateway: Services) -> None:
    """The daemon audits at once what expired while it was down, and sets the expiry timer."""
    if gateway.run_jobs:
        approval_book(gateway)


@hookimpl
def gateway_shutdown(gateway: Services) -> None:
    book = gateway.stash.get(APPROVALS)
    if book is not None:
        book.close()


@hookimpl
def gateway_users_merged(gateway: Services, into: str, source: str) -> None:
    gateway.state.approval_audit.merge(into=into, source=source)


@hookimpl
def gateway_register_jobs(register: JobRegistry) -> None:
    register(reminders.reminder_due, name=reminders.REMINDER_JOB, timeout=60, max_tries=5)


def problems(config: Config) -> list[str]:
    """What pydantic cannot check: a tool turned on without the extra it needs."""
    found = []
    missing = [m for m in ("icalendar", "cryptography") if importlib.util.find_spec(m) is None]
    if config.tools.calendar.enabled and missing:
        found.append(f"tools.calendar.enabled: the calendar needs {', '.join(missing)} "
                     "(pip install 'kith[calendar]')")
    missing = [m for m in mail_tool.EXTRAS if importlib.util.find_spec(m) is None]
    if config.tools.mail.enabled and missing:
        found.append(f"tools.mail.enabled: the mail tools need {', '.join(missing)} (pip install 'kith[email]')")
    return found


@hookimpl
def gateway_configure(config: Config) -> None:
    from gateway.config import ConfigError

    found = problems(config)
    if found:
        raise ConfigError(found, "tools")


@hookimpl
def gateway_register_commands(register: CommandRegistry, config: Config) -> None:
    for name, text in approvals.HELP.items():
        register(name, text)
    register("calendar", calendar_tool.COMMAND_HELP)
    register("mail", mail_tool.COMMAND_HELP)


@hookimpl
async def gateway_handle_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
    if turn.user is None:
        return None
    if command in approvals.HELP:
        return await approvals.approval_command(gateway, turn, command, args)
    if command == "calendar":
        return await calendar_tool.calendar_command(gateway, turn, args)
    if command == "mail":
        return await mail_tool.mail_command(gateway, turn, args)
    return None


@hookimpl
async def gateway_briefing_sections(gateway: Services, user_id: str, now: datetime) -> list[BriefingSection] | None:
    """The calendar's agenda and the inbox, side by side, each within its own bound (shorter than the
    hook's): a server that does not answer, or a section that fails, leaves out only itself."""
    agenda = mail_briefing.bound_s(gateway, gateway.config.tools.calendar.timeout_s)
    found = await asyncio.gather(_alone(calendar_tool.agenda(gateway, user_id, now), "agenda", agenda),
                                 _alone(mail_briefing.inbox_section(gateway, user_id, now), "inbox"))
    return [s for s in found if s is not None] or None


async def _alone(section: Awaitable[BriefingSection | None], name: str,
                 limit: float | None = None) -> BriefingSection | None:  # fmt: skip
    try:
        async with asyncio.timeout(limit):
            return await section
    except TimeoutError:
        log.info("briefing %s left out: no answer within %.1f s", name, limit)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("briefing %s failed; left out", name)
    return None
