"""Built-in plugin: append each turn to ``users/<id>/sessions/YYYY-MM-DD.md``.

The raw session log is human-readable memory the distillation tiers read later. Appends go through
the guarded memory store, batched by a background flusher so a burst of turns costs one atomic
rewrite per file instead of one per turn; the SQLite transcript is the durable record meanwhile.
Off-The-Record turns never get here.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory import jobscope
from gateway.memory.errors import FileTooLargeError
from gateway.memory.scopes import channel_scope, user_scope
from gateway.memory.store import MemoryStore
from gateway.types import ConversationKind, LLMResponse, Reply, Turn

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger("kith.session_log")
FLUSH_INTERVAL_S = 0.5


class SessionLog:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.pending: dict[tuple[str, str], list[str]] = defaultdict(list)  # (scope, file) -> entries
        self.parts: dict[tuple[str, str], str] = {}  # (scope, day file) -> the part being appended to
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def add(self, turn: Turn, reply: Reply) -> None:
        assert turn.user is not None and turn.session is not None
        tz = jobscope.zone(turn.user.timezone)
        local = turn.received_at.astimezone(tz)
        rel = f"sessions/{local:%Y-%m-%d}.md"
        speaker = turn.message.display_name or turn.message.account_id
        entry = (
            f"\n## {local:%H:%M:%S} · {turn.message.channel} · session {turn.session.session_id[:8]}"
            f" · turn {turn.turn_id}\n\n**{speaker}:** {turn.message.text}\n\n**assistant:** {reply.text}\n"
        )
        # A group's log belongs to the group (its channel root), not to whoever happened to speak.
        if turn.message.kind == ConversationKind.GROUP:
            key = (channel_scope(turn.message.conversation_key), rel)
        else:
            key = (user_scope(turn.user.user_id), rel)
        self.pending[key].append(entry)
        self.wake.set()

    def _store(self, scope: str) -> MemoryStore:
        memory = self.gateway.memory
        assert memory is not None
        return memory.store_for(scope)

    def _append(self, scope: str, rel: str, entries: list[str]) -> None:
        """Append to the day's log; past the store's file cap, continue in ``<day>.2.md``, ``.3.md``...

        A busy day must not lose its log to the cap (the transcript is the durable record, but the
        Markdown log is what distillation and people read). An entry too big for any file is cut,
        with a note, rather than dropped.
        """
        store = self._store(scope)
        day = rel.removeprefix("sessions/").removesuffix(".md")
        target = self.parts.get((scope, rel), rel)
        text = "".join(entries)
        while True:
            fresh = not store.exists(target)
            body = (f"# Sessions {day}\n" if fresh else "") + text
            try:
                store.append(target, body, source="session_log")
                break
            except FileTooLargeError:
                if fresh:  # even an empty file cannot take it: shrink the batch to fit
                    cap = store.max_file_bytes - 200
                    text = text.encode()[:cap].decode(errors="ignore") + "\n[... cut: over the file size cap;" \
                        " the full text is in the transcript]\n"
                    continue
                part = int(target.rsplit(".", 2)[-2]) + 1 if target.count(".") == 2 else 2
                target = f"sessions/{day}.{part}.md"
        self.parts[(scope, rel)] = target

    async def run(self) -> None:
        while True:
            await self.wake.wait()
            await asyncio.sleep(FLUSH_INTERVAL_S)
            await self.flush()

    async def flush(self) -> None:
        self.wake.clear()
        batch, self.pending = self.pending, defaultdict(list)
        self.parts = {k: v for k, v in self.parts.items() if k in batch}  # forget idle days
        for (scope, rel), entries in batch.items():
            try:
                await asyncio.to_thread(self._append, scope, rel, entries)
            except Exception:
                log.exception("could not append the session log %s for %s", rel, scope)


_KEY = "session_log"


def _log_of(gateway: Gateway) -> SessionLog | None:
    return gateway.plugin_state.get(_KEY)  # type: ignore[no-any-return]


@hookimpl
async def gateway_startup(gateway: Gateway) -> None:
    sl = SessionLog(gateway)
    sl.task = asyncio.create_task(sl.run(), name="session-log")
    gateway.plugin_state[_KEY] = sl


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    sl = gateway.plugin_state.pop(_KEY, None)
    if sl is None:
        return
    if sl.task:
        sl.task.cancel()
    await sl.flush()


@hookimpl
async def gateway_before_users_merge(gateway: Gateway, into: str, source: str) -> None:
    sl = _log_of(gateway)
    if sl is not None:
        await sl.flush()


@hookimpl
async def gateway_flush(gateway: Gateway) -> None:
    sl = _log_of(gateway)
    if sl is not None and sl.pending:
        await sl.flush()


@hookimpl
def gateway_after_turn(gateway: Gateway, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
    if turn.otr or turn.user is None or turn.session is None:
        return
    sl = _log_of(gateway)
    if sl is None:
        log.warning("session log not started; turn %s not appended to the Markdown log", turn.turn_id)
        return
    sl.add(turn, reply)
