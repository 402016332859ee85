"""Built-in plugin: the person's schedule (``gateway.schedule``) in a running gateway.

* ``/tz`` shows, ``/tz Europe/Berlin`` sets the person's time zone (IANA names only) on any channel;
  their items are re-armed in the new zone at once.
* First contact: the first reply carries one line saying which zone kith assumed and how to change it
  (once per person, recorded in ``users/<id>/.schedule/offered``).
* The ``schedule_due`` job fires reminders, scheduled prompts and task alerts (``engine.fire``); a
  scheduled prompt of kind ``briefing`` runs ``plugins.briefing.run_briefing``.
* Start-up arms every person's items (a hand edit made while kith was down); a watcher picks up hand
  edits while it runs; an invalid line is reported to the person once and left in the file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.bus.registry import JobRegistry
from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.memory.files.watch import shared
from gateway.schedule import engine
from gateway.schedule.items import FILES
from gateway.schedule.watch import ScheduleEdits
from gateway.schedule.zones import suggest, valid_zone
from gateway.turn.command_registry import CommandRegistry
from gateway.types import ConversationKind, LLMResponse, Reply, StashKey, Turn
from plugins.briefing import run_briefing

if TYPE_CHECKING:
    from gateway.bus.context import JobContext
    from gateway.services import Services

log = logging.getLogger("kith.schedule")
WATCHER: StashKey[ScheduleEdits] = StashKey()
HELP = "/tz: show your time zone\n/tz ZONE: set it (an IANA name such as Europe/Berlin); reminders follow it"
OFFER = "(I assumed the time zone {tz} for you; say /tz Europe/Berlin or your own zone to change it.)"


@hookimpl
def gateway_register_commands(register: CommandRegistry, config: Config) -> None:
    register("tz", HELP)


@hookimpl
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    register(schedule_due, name=engine.JOB, timeout=300, max_tries=5)


async def schedule_due(ctx: JobContext, payload: dict[str, Any]) -> None:
    await engine.fire(ctx.gateway, payload)


async def set_zone(gateway: Services, user_id: str, name: str) -> str:
    """Set the person's zone (the same state method as the settings API) and re-arm their items."""
    name = name.strip()
    if not valid_zone(name):
        close = suggest(name)
        hint = f" Did you mean {', '.join(close)}?" if close else " Use an IANA name such as Europe/Berlin."
        return f"{name!r} is not a time zone I know.{hint}"
    gateway.state.users.set_timezone(user_id, name)
    if gateway.bus is not None and gateway.memory is not None:
        await engine.sync_user(gateway, user_id)
    return f"Your time zone is now {name}; reminders and scheduled prompts follow it."


@hookimpl
async def gateway_handle_command(gateway: Services, turn: Turn, command: str, args: str) -> Reply | None:
    if command != "tz" or turn.user is None:
        return None
    if not args.strip():
        tz = engine.user_zone(gateway, turn.user.user_id)
        return Reply(text=f"Your time zone is {tz}. Change it with /tz ZONE, e.g. /tz Europe/Berlin.", notice=True)
    return Reply(text=await set_zone(gateway, turn.user.user_id, args), notice=True)


def _offered_path(gateway: Services, user_id: str) -> Path:
    return Path(gateway.data_dir) / "users" / user_id / ".schedule" / "offered"


@hookimpl
def gateway_render_reply(gateway: Services, turn: Turn, response: LLMResponse) -> Reply | None:
    """First contact: the reply ends with one line about the assumed zone (never again after)."""
    from gateway.turn.protocol import default_render

    user, msg = turn.user, turn.message
    if not gateway.config.identity.offer_timezone:
        return None
    if user is None or msg.channel == engine.SCHEDULED_CHANNEL or msg.kind is not ConversationKind.DM:
        return None
    path = _offered_path(gateway, user.user_id)
    if path.exists():
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(turn.turn_id, "utf-8")
    except OSError:
        return None  # never offered twice because a marker could not be written: skip instead
    tz = engine.user_zone(gateway, user.user_id)
    return default_render(gateway, turn, f"{response.text}\n\n{OFFER.format(tz=tz)}")


@hookimpl
async def gateway_memory_edited(gateway: Services, user_id: str, paths: list[str]) -> None:
    """/forget (or an undo) rewrote a schedule file: what it removed is no longer armed to fire, what
    it put back is armed again (a job that finds its item gone delivers nothing anyway)."""
    touched = tuple(r for r in FILES if r in paths)
    if touched and gateway.bus is not None and gateway.memory is not None:
        await engine.sync_user(gateway, user_id, touched)


@hookimpl
async def gateway_conversation_changed(gateway: Services, user_id: str) -> None:
    """A settings change (the web settings page) may have moved the person's zone: re-arm their items
    when it did (``/tz`` re-arms itself)."""
    sched = engine.schedule_of(gateway)
    if gateway.bus is None or gateway.memory is None or not user_id:
        return
    zone_now = engine.user_zone(gateway, user_id)
    if sched.zones.get(user_id) != zone_now:
        await engine.sync_user(gateway, user_id)


@hookimpl(trylast=True)
async def gateway_startup(gateway: Services) -> None:
    sched = engine.schedule_of(gateway)
    sched.runners.setdefault("briefing", run_briefing)  # CRONS.json prompts of kind "briefing"
    if not gateway.run_jobs or gateway.memory is None or gateway.memory.detached:
        return

    def is_own(uid: str, rel: str, text: str) -> bool:
        return sched.own.get((uid, rel)) == text

    async def on_edit(uid: str, rels: tuple[str, ...]) -> None:
        await engine.sync_user(gateway, uid, tuple(r for r in FILES if r in rels))

    watcher = shared(gateway)  # the one file watcher, shared with re-indexing
    gateway.stash[WATCHER] = ScheduleEdits(watcher, on_edit, is_own)
    await watcher.start()
    # Arming everyone's items at start-up is the scheduler role's (one node at a time, gateway/cluster);
    # a node that becomes the holder later arms them then (arming is idempotent: one job id per item).
    def arm_all() -> None:
        gateway.spawn(engine.sweep(gateway), name="schedule:sweep")

    gateway.cluster.on_leader(arm_all)


@hookimpl
async def gateway_shutdown(gateway: Services) -> None:
    edits = gateway.stash.get(WATCHER)
    if edits is not None:
        await edits.watcher.stop()
    await engine.recorder_of(gateway).close()
