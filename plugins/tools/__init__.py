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

from gateway.bus.registry import JobRegistry
from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolRegistry
from plugins.tools import (
    follow_links,
    memory_forget,
    memory_get,
    memory_remember,
    memory_search,
    reminders,
    scratchpad,
    tasks,
)

TOOLS: tuple[Tool, ...] = (memory_search.TOOL, memory_get.TOOL, reminders.TOOL, scratchpad.TOOL, tasks.TOOL,
                           memory_remember.TOOL, memory_forget.TOOL, follow_links.TOOL)


@hookimpl
def gateway_register_tools(register: ToolRegistry) -> None:
    for tool in TOOLS:
        register(tool)


@hookimpl
def gateway_register_jobs(register: JobRegistry) -> None:
    register(reminders.reminder_due, name=reminders.REMINDER_JOB, timeout=60, max_tries=5)
