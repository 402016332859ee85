"""Built-in plugin: the persona's files and the speaker's tiered memory files in the system prompt.

Persona (``<data_dir>/personas/<session persona>/``), by tier: IDENTITY (1), SOUL and PROTOCOLS (2),
CONTEXT_TIERS (3). Stable, protected and first: the Anthropic cache breakpoint sits after the stable
sections, so the persona is served from the prompt cache turn after turn.

The speaker's own root (``users/<id>/``), by tier: MEMORY_SHORT and MEMORY_MID (2), MEMORY_LONG (3) as
dated digests (quoted data, trimmed after recall and facts); REMINDERS (2); SCRATCH and TASKS (4).
A group conversation never receives any of them: other people read the answers there.

Files are re-read only when they changed (``FileCache``); a persona is created from its template at
startup when the config names one that does not exist yet.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.config import Config, ConfigError
from gateway.hookspecs import hookimpl
from gateway.personas import FileCache, PersonaError, ensure_configured, persona_store, source_for
from gateway.personas.choice import turn_persona
from gateway.personas.command import HELP_LINE, persona_command
from gateway.personas.onboarding import HELP_LINE as SETUP_HELP_LINE
from gateway.personas.onboarding import answer as setup_answer
from gateway.personas.onboarding import draft_of, setup_command
from gateway.turn.budget import TRIM_DATED, TRIM_PEOPLE, TRIM_WORKING
from gateway.turn.tiers import loads, tier_of
from gateway.types import ContextSection, ConversationKind, Reply, Stability, Turn
from plugins.tools.reminders import REMINDERS, render_reminders
from plugins.tools.scratchpad import SCRATCH
from plugins.tools.tasks import TASKS, render_tasks

if TYPE_CHECKING:
    from gateway.services import Services
    from gateway.turn.command_registry import CommandRegistry

log = logging.getLogger("kith.persona")

# (file, title, priority): the persona leads the prompt, before the profile and everything else.
PERSONA_SECTIONS: tuple[tuple[str, str, int], ...] = (
    ("IDENTITY.md", "Identity", 960),
    ("SOUL.md", "Soul", 950),
    ("PROTOCOLS.md", "Protocols", 940),
    ("CONTEXT_TIERS.md", "Context tiers", 930),
)

# (file, title, priority, token budget): dated digests, oldest-and-broadest first.
DIGESTS: tuple[tuple[str, str, int, int], ...] = (
    ("MEMORY_LONG.md", "Long-term memory", 520, 800),
    ("MEMORY_MID.md", "Mid-term memory", 510, 600),
    ("MEMORY_SHORT.md", "Recent memory", 500, 800),
)
DIGEST_TRIM_RANK = TRIM_DATED
WORKSPACE_TRIM_RANK = TRIM_PEOPLE
REMINDERS_TRIM_RANK = TRIM_WORKING

FILES = FileCache()


def _strip_title(text: str) -> str:
    """Drop a leading ``# Heading`` line: the section already carries its title."""
    head, sep, rest = text.lstrip().partition("\n")
    return rest.strip() if sep and head.startswith("# ") else text.strip()


def persona_name(gateway: Services, turn: Turn) -> str:
    return turn_persona(gateway, turn)


def persona_sections(gateway: Services, turn: Turn, tier: int) -> list[ContextSection]:
    name = persona_name(gateway, turn)
    store = persona_store(gateway, name)
    out = []
    for fname, title, priority in PERSONA_SECTIONS:
        if not loads(tier, fname):
            continue
        text, _ = FILES.read(store, fname)
        text = _strip_title(text)
        if text:
            out.append(ContextSection(source=f"persona:{name}/{fname}", title=title, text=text, priority=priority,
                                      stability=Stability.STABLE, protected=True))
    return out


def _date(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d")


def user_sections(gateway: Services, turn: Turn, tier: int) -> list[ContextSection]:
    if turn.user is None or turn.message.kind is ConversationKind.GROUP:
        return []
    store = gateway.memory_store(turn.user.user_id)
    out = []
    for fname, title, priority, budget in DIGESTS:
        if not loads(tier, fname):
            continue
        text, mtime = FILES.read(store, fname)
        if text.strip():
            # Digests change daily at most: stable, so they ride in the cached prefix.
            out.append(ContextSection(
                source=f"user:{fname}", title=f"{title} ({fname}, as of {_date(mtime)})", text=text.strip(),
                priority=priority, budget=budget, stability=Stability.STABLE, trim_rank=DIGEST_TRIM_RANK,
                as_data=True))
    if loads(tier, REMINDERS):
        text, _ = FILES.read(store, REMINDERS)
        pending = render_reminders(text) if text else ""
        if pending:
            out.append(ContextSection(source=f"user:{REMINDERS}", title="Pending reminders", text=pending,
                                      priority=300, budget=300, trim_rank=REMINDERS_TRIM_RANK, as_data=True))
    if loads(tier, SCRATCH):
        text, _ = FILES.read(store, SCRATCH)
        if text.strip():
            out.append(ContextSection(source=f"user:{SCRATCH}", title=f"Scratchpad ({SCRATCH})", text=text.strip(),
                                      priority=290, budget=800, trim_rank=WORKSPACE_TRIM_RANK, as_data=True))
    if loads(tier, TASKS):
        text, _ = FILES.read(store, TASKS)
        rendered = _tasks_text(text)
        if rendered:
            out.append(ContextSection(source=f"user:{TASKS}", title=f"Tasks ({TASKS})", text=rendered,
                                      priority=280, budget=500, trim_rank=WORKSPACE_TRIM_RANK, as_data=True))
    return out


def _tasks_text(raw: str) -> str:
    if not raw.strip():
        return ""
    try:
        data = json.loads(raw)
    except ValueError:
        return f"{TASKS} is not valid JSON; the tasks tool will say so."
    tasks = data.get("tasks") if isinstance(data, dict) else data
    if not isinstance(tasks, list) or not tasks:
        return ""
    return render_tasks([t for t in tasks if isinstance(t, dict)])


@hookimpl
def gateway_configure(config: Config) -> None:
    # A template that names nothing would leave a configured persona missing: refuse to start. Once
    # every persona exists the template is not needed, so it is not checked.
    base = Path(config.data_dir) / "personas"
    if all((base / name / "IDENTITY.md").is_file() for name in config.personas.names()):
        return
    try:
        source_for(Path(config.data_dir), config.personas.template)
    except PersonaError as exc:
        raise ConfigError([f"personas.template: {exc}"]) from None


@hookimpl
def gateway_startup(gateway: Services) -> None:
    for created in ensure_configured(gateway):
        log.info("created persona %s from %s in %s: edit its files to shape it", created.name, created.source,
                 created.root)


@hookimpl
def gateway_context_sections(gateway: Services, turn: Turn) -> list[ContextSection]:
    tier = tier_of(gateway, turn)
    return [*persona_sections(gateway, turn, tier), *user_sections(gateway, turn, tier)]


@hookimpl
def gateway_register_commands(register: CommandRegistry, config: Config) -> None:
    register("persona", HELP_LINE)
    register("setup", SETUP_HELP_LINE)


@hookimpl
async def gateway_handle_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
    if turn.user is None:
        return None
    if command == "persona":
        return await persona_command(gateway, turn, args)
    if command == "setup":
        return await setup_command(gateway, turn, args)
    return None


@hookimpl(tryfirst=True)
def gateway_prepare_message(gateway: Services, turn: Turn) -> Reply | None:
    # While /setup persona waits for an answer in this conversation, the message is that answer: it
    # is neither recorded nor sent to the model (the media stage after this one never sees it).
    if turn.user is None or turn.message.kind is ConversationKind.GROUP:
        return None
    draft = draft_of(gateway, turn.user.user_id, turn.message.conversation_key)
    return None if draft is None else setup_answer(gateway, turn, draft)


@hookimpl
def gateway_users_merged(gateway: Services, into: str, source: str) -> None:
    # The surviving person's persona choices win; the merged account's fill the gaps.
    gateway.state.persona_choices.merge(into=into, source=source)
