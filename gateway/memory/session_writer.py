"""The session-log writer: each answered turn appended to ``sessions/YYYY-MM-DD.md`` of its memory root.

The raw session log is human-readable memory the distillation tiers read later, and the source the
turn index is rebuilt from; its format lives in ``gateway.memory.files.session_log`` (the UTC instant and
the full ids in every block, message bodies quoted so no text can pass for structure). Appends go through
the guarded memory store, batched by a background flusher so a burst of turns costs one atomic
rewrite per file instead of one per turn. The SQLite transcript is the durable record meanwhile, and
nothing it holds is lost on the way to the Markdown log:

* a batch being written is never cancelled: the flusher stops between batches, and shutdown drains
  whatever is pending;
* a batch that cannot be written (read-only directory, full disk) goes back to the front of the queue
  and is retried with exponential backoff; the failure is logged once per streak, the recovery once;
* at start, a background task compares the transcript of the last days with the logs and appends the
  turns that are missing (a kill inside the batch window, a batch still failing at shutdown). A
  watermark in the state database keeps each start to the turns since the previous one. A row whose
  stored time is not a timestamp (damaged by hand, or imported before imports were checked) cannot be
  placed in a day's log: it is skipped and reported (seq and turn id, once), and the others are written;
* a turn the transcript could not take either (a full disk) is in the turn spool: written back to the
  transcript before the writer starts, it is found by that catch-up; still waiting for the
  transcript, it is queued here from the spool (``gateway/turn/writeback.py``).

Off-The-Record turns never get here (nor into the transcript). The plugin ``plugins/session_log.py``
runs one ``SessionLog`` per gateway and hands it every turn (its hook implementations are all it holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from gateway.memory.background import jobscope
from gateway.memory.files.errors import FileTooLargeError, MemoryFileNotFoundError, MemoryStoreError
from gateway.memory.files.scopes import channel_scope, user_scope
from gateway.memory.files.session_log import (
    LogEntry,
    day_log_path,
    format_entry,
    log_day,
    parse_session_log,
    unlogged,
)
from gateway.memory.files.store import MemoryStore
from gateway.state import LoggedTurn
from gateway.turn.spool import SpooledTurn
from gateway.types import ConversationKind, Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.session_log")
FLUSH_INTERVAL_S = 0.5
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 60.0
MAX_PENDING = 20_000  # entries held while the log cannot be written; the rest waits in the transcript
RECONCILE_DAYS = 7  # how far back a start compares the transcript with the logs
RECONCILE_PAGE = 500
RECONCILE_ON_STOP_S = 15.0  # how long a stop waits for a start-up catch-up still running
WATERMARK = "session_log"
SOURCE = "session_log"

Key = tuple[str, str]  # (memory scope, day file)


@dataclass(slots=True)
class _Failure:
    since: float
    attempts: int = 0
    retry_at: float = 0.0


class SessionLog:
    def __init__(self, gateway: Services) -> None:
        self.gateway = gateway
        # (scope, day file) -> turn id -> block; insertion order is the order of the log.
        self.pending: dict[Key, OrderedDict[str, str]] = {}
        self.parts: dict[Key, str] = {}  # (scope, day file) -> the part being appended to
        self.wake = asyncio.Event()
        self.lock = asyncio.Lock()  # one batch at a time, so blocks of one file keep their order
        self.task: asyncio.Task[None] | None = None
        self.reconciler: asyncio.Task[int] | None = None
        self.closing = False
        self.failure: _Failure | None = None
        self.dropped = 0  # entries let go past MAX_PENDING in this failure streak
        self.dropped_total = 0
        self.reconciled = 0
        self.damaged = 0  # transcript rows the reconciliation skipped: their stored time is not a timestamp
        self.scanned = asyncio.Event()  # the start-up reconciliation has queued what was missing
        # Spooled turns queued at start: their whole entry is queued, the transcript may hold only
        # the message (stored before the model call), so the catch-up leaves them alone.
        self.spooled: set[str] = set()

    # ------------------------------------------------------------------------------- queueing

    def add(self, turn: Turn, reply: Reply) -> None:
        assert turn.user is not None and turn.session is not None
        if unlogged(turn.message.conversation_key):
            return
        tz = jobscope.zone(turn.user.timezone)
        entry = LogEntry(
            turn_id=turn.turn_id, session_id=turn.session.session_id, channel=turn.message.channel,
            speaker=turn.message.display_name or turn.message.account_id, text=turn.message.text,
            timestamp=turn.received_at, reply=reply.text, reply_at=datetime.now(UTC),
        )
        # A group's log belongs to the group (its channel root), not to whoever happened to speak.
        if turn.message.kind == ConversationKind.GROUP:
            scope = channel_scope(turn.message.conversation_key)
        else:
            scope = user_scope(turn.user.user_id)
        self.queue((scope, day_log_path(entry.timestamp, tz)), entry.turn_id, format_entry(entry, tz))

    def add_spooled(self, turn: SpooledTurn) -> None:
        """A turn an earlier run answered and spooled, not in the transcript yet (gateway/turn/writeback.py):
        its log entry is queued now, as the turn's own after-turn hook had, so it does not wait for
        the write-back and the catch-up of a later start."""
        if unlogged(turn.conversation_key):
            return
        user = self.gateway.state.users.get(turn.user_id)
        tz = jobscope.zone((user.timezone if user is not None else "") or None)
        entry = LogEntry(
            turn_id=turn.turn_id, session_id=turn.session_id, channel=turn.channel, speaker=turn.speaker,
            text=turn.text, timestamp=turn.at, reply=turn.reply, reply_at=turn.reply_at,
        )
        scope = channel_scope(turn.conversation_key) if turn.group else user_scope(turn.user_id)
        self.spooled.add(turn.turn_id)
        self.queue((scope, day_log_path(entry.timestamp, tz)), entry.turn_id, format_entry(entry, tz))

    def queue(self, key: Key, turn_id: str, block: str) -> None:
        if self.size() >= MAX_PENDING:
            # Only while the log has been failing for a long time: the transcript keeps the turn, and
            # the next start's reconciliation writes it.
            if not self.dropped:
                log.error("session log: %d entries waiting; further turns wait in the transcript until the "
                          "next start", MAX_PENDING)
            self.dropped += 1
            self.dropped_total += 1
            return
        self.pending.setdefault(key, OrderedDict())[turn_id] = block
        self.wake.set()

    def size(self) -> int:
        return sum(len(v) for v in self.pending.values())

    def _requeue(self, key: Key, batch: OrderedDict[str, str]) -> None:
        """A batch that was not written goes back in front of what came in meanwhile, once."""
        newer = self.pending.pop(key, OrderedDict())
        merged = OrderedDict(batch)
        for turn_id, block in newer.items():
            merged.setdefault(turn_id, block)
        self.pending[key] = merged

    # -------------------------------------------------------------------------------- writing

    def _store(self, scope: str) -> MemoryStore:
        memory = self.gateway.memory
        assert memory is not None
        return memory.stores.store_for(scope)

    def _append(self, scope: str, rel: str, blocks: OrderedDict[str, str], retry: bool) -> None:
        """Append to the day's log; past the store's file cap, continue in ``<day>.2.md``, ``.3.md``...

        A busy day must not lose its log to the cap (the transcript is the durable record, but the
        Markdown log is what distillation and people read). An entry too big for any file is cut,
        with a note, rather than dropped. ``retry``: an earlier attempt failed, possibly after the
        file was replaced (the audit line failing, say), so blocks already there are not written again.
        """
        # Several nodes: a starting node's reconcile may append a turn another node is about to write
        # from its batch; the check below and the write happen under one lock shared by the nodes.
        with self.gateway.cluster.file_lock(f"session-log/{scope}/{rel}") as shared:
            self._append_locked(scope, rel, blocks, retry or shared is not None)

    def _append_locked(self, scope: str, rel: str, blocks: OrderedDict[str, str], retry: bool) -> None:
        store = self._store(scope)
        if retry:
            present = logged_ids(store, rel)
            blocks = OrderedDict((t, b) for t, b in blocks.items() if t not in present)
            if not blocks:
                return
        day = rel.removeprefix("sessions/").removesuffix(".md")
        target = self.parts.get((scope, rel), rel)
        todo = list(blocks.values())
        while todo:
            fresh = not store.exists(target)
            head = f"# Sessions {day}\n" if fresh else ""
            try:
                store.append(target, head + "".join(todo), source=SOURCE)
                break
            except FileTooLargeError:
                if fresh:
                    # Even an empty part cannot take the batch: as many blocks as fit go here, the
                    # rest to the next part; a single block over the cap is cut, with a note.
                    room = store.max_file_bytes - len(head.encode())
                    n, size = 0, 0
                    while n < len(todo) and size + len(todo[n].encode()) <= room:
                        size += len(todo[n].encode())
                        n += 1
                    if n:
                        piece = "".join(todo[:n])
                    else:
                        n = 1
                        piece = todo[0].encode()[: room - 100].decode(errors="ignore") + \
                            "\n[... cut: over the file size cap; the full text is in the transcript]\n"
                    store.append(target, head + piece, source=SOURCE)
                    todo = todo[n:]
                part = int(target.rsplit(".", 2)[-2]) + 1 if target.count(".") == 2 else 2
                target = f"sessions/{day}.{part}.md"
        self.parts[(scope, rel)] = target

    async def run(self) -> None:
        """The flusher: a batch every ``FLUSH_INTERVAL_S`` while turns come in, retries with backoff.
        Cancelling it cancels a wait, never a batch (the batch is shielded and shutdown drains)."""
        while not self.closing:
            await self.wake.wait()
            failure = self.failure
            delay = max(FLUSH_INTERVAL_S, failure.retry_at - time.monotonic()) if failure else FLUSH_INTERVAL_S
            await asyncio.sleep(delay)
            if self.closing:
                break
            await asyncio.shield(self.flush())

    async def flush(self) -> bool:
        """Write everything pending now; False when something could not be written (it stays queued)."""
        async with self.lock:
            self.wake.clear()
            batch, self.pending = self.pending, {}
            self.parts = {k: v for k, v in self.parts.items() if k in batch}  # forget idle days
            retry = self.failure is not None
            failed: list[tuple[Key, BaseException]] = []
            for key, blocks in batch.items():
                scope, rel = key
                try:
                    await asyncio.to_thread(self._append, scope, rel, blocks, retry)
                except Exception as exc:  # every failure is retried; logged once per streak in _account
                    failed.append((key, exc))
                    self._requeue(key, blocks)
            self._account(failed, sum(len(b) for b in batch.values()))
            if self.pending:
                self.wake.set()
            return not failed

    def _account(self, failed: list[tuple[Key, BaseException]], attempted: int) -> None:
        now = time.monotonic()
        if failed:
            f = self.failure
            if f is None:
                f = self.failure = _Failure(since=now)
                (scope, rel), exc = failed[0]
                log.error("could not append the session log %s for %s (%d files failing): %s; the entries "
                          "stay queued and are retried with backoff, the transcript keeps them meanwhile",
                          rel, scope, len(failed), exc, exc_info=exc)  # fmt: skip
            f.attempts += 1
            f.retry_at = now + min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (f.attempts - 1))
            return
        if self.failure is not None and attempted:
            log.warning("session log writable again after %d failed attempts in %.0f s; queued entries written",
                        self.failure.attempts, now - self.failure.since)
            self.failure = None
            self.dropped = 0

    async def drain(self, *, attempts: int = 3) -> bool:
        """Flush until nothing is pending (at most ``attempts`` tries on failure); True when empty."""
        # A batch in flight has left ``pending`` already and is shielded from the flusher's cancel:
        # wait for it, or shutdown would end while it still writes (and lose what it had not written
        # yet to the next start's catch-up). Its lock is held for exactly as long as it writes.
        async with self.lock:
            pass
        for _ in range(attempts):
            if not self.pending:
                return True
            if await self.flush():
                continue
            if self.failure is not None:
                await asyncio.sleep(min(1.0, max(0.0, self.failure.retry_at - time.monotonic())))
        return not self.pending

    async def close(self) -> None:
        self.closing = True
        self.wake.set()
        if self.reconciler is not None and not self.reconciler.done():
            # A daemon stopped right after its start (a restart loop, a node of a cluster taken down
            # again) still finishes its catch-up when it is short: otherwise what a killed run left
            # out of the logs waits for a start that lives long enough.
            with contextlib.suppress(Exception):  # TimeoutError included: then cancelled below
                await asyncio.wait_for(asyncio.shield(self.reconciler), timeout=RECONCILE_ON_STOP_S)
        for task in (self.reconciler, self.task):
            if task is not None and not task.done():
                task.cancel()  # a wait, or the reconciler between pages; never a batch (shielded)
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception:
                    log.exception("session log task %s failed", task.get_name())
        if not await self.drain():
            log.error("session log: %d entries could not be written before shutdown; the next start writes "
                      "them from the transcript", self.size())

    # ------------------------------------------------------------------------------ reconciling

    async def reconcile(self, upto_seq: int, *, now: datetime | None = None) -> int:
        """Append transcript turns up to ``upto_seq`` that no log holds; how many were missing.

        Bounded to the turns after the watermark and the last ``RECONCILE_DAYS`` days (never before the
        retention cutoff: a pruned day must stay pruned). Idempotent: a second run finds nothing.
        """
        try:
            return await self._reconcile(upto_seq, now or datetime.now(UTC))
        finally:
            self.scanned.set()

    async def _reconcile(self, upto_seq: int, now: datetime) -> int:
        state = self.gateway.state
        after = state.watermarks.get(WATERMARK)
        if upto_seq <= after:
            return 0
        since = now - self._window()
        seen: dict[tuple[str, str], set[str] | None] = {}  # (scope, day) -> turn ids in its files, None: unreadable
        queued: list[tuple[Key, str]] = []
        dropped = self.dropped_total
        unreadable = False
        cursor = after
        damaged: list[LoggedTurn] = []
        while rows := state.turns.logged(after_seq=cursor, upto_seq=upto_seq, since=since, limit=RECONCILE_PAGE):
            cursor = rows[-1].seq
            for row in rows:
                if row.created_at is None:
                    damaged.append(row)
                    continue
                if row.turn_id in self.spooled or unlogged(row.conversation_key):
                    continue
                scope, tz = _scope_of(row), jobscope.zone(row.timezone or None)
                entry = _entry_of(row, row.created_at)
                rel = day_log_path(entry.timestamp, tz)
                logged = await self._logged(seen, scope, rel, entry.turn_id)
                if logged is None:
                    unreadable = True  # cannot tell: leave the turn to the next start
                elif not logged:
                    self.queue((scope, rel), entry.turn_id, format_entry(entry, tz))
                    queued.append(((scope, rel), entry.turn_id))
            if self.failure is None and self.size() >= RECONCILE_PAGE:
                await self.flush()  # a long backlog is written as it is found, not held in memory
            await asyncio.sleep(0)  # turns keep being served between pages
        if queued:
            log.warning("session log: %d turns of the transcript were missing from the Markdown logs; appending "
                        "them", len(queued))
        if damaged:
            self.damaged += len(damaged)
            log.error("session log: %d transcript rows have a stored time that is not a timestamp and cannot be "
                      "placed in a day's log; skipped (seq/turn id: %s)", len(damaged),
                      ", ".join(f"{r.seq}/{r.turn_id}" for r in damaged[:20]))  # fmt: skip
        self.scanned.set()
        # The watermark moves only once every block is written: a failing disk leaves them to the
        # flusher's retries, a stop before that to the next start.
        while any(turn_id in self.pending.get(key, ()) for key, turn_id in queued):
            if self.failure is None:
                await self.flush()
            else:
                await asyncio.sleep(1.0)
        if self.dropped_total == dropped and not unreadable:
            state.watermarks.set(WATERMARK, upto_seq)
        self.reconciled += len(queued)
        return len(queued)

    async def _logged(
        self, seen: dict[tuple[str, str], set[str] | None], scope: str, rel: str, turn_id: str
    ) -> bool | None:
        """Whether a log of the turn's day (or a day either side: a timezone changed since) holds it;
        None when one of them cannot be read (a symlink, a hard link, a directory in the way)."""
        day = log_day(rel)
        assert day is not None
        store = self._store(scope)
        unknown = False
        for d in (day, day - timedelta(days=1), day + timedelta(days=1)):
            key = (scope, d.isoformat())
            if key not in seen:
                try:
                    seen[key] = await asyncio.to_thread(logged_ids, store, f"sessions/{d.isoformat()}.md")
                except MemoryStoreError as exc:
                    log.warning("session log: cannot read %s of %s to compare it with the transcript: %s",
                                f"sessions/{d.isoformat()}.md", scope, exc)
                    seen[key] = None
            ids = seen[key]
            if ids is None:
                unknown = True
            elif turn_id in ids:
                return True
        return None if unknown else False

    def _window(self) -> timedelta:
        window = timedelta(days=RECONCILE_DAYS)
        keep = self.gateway.config.background.retention.memory_retention_days
        return min(window, timedelta(days=keep - 1)) if keep > 0 else window


def logged_ids(store: MemoryStore, rel: str) -> set[str]:
    """Turn ids in a day's log and its continuation parts (``<day>.2.md``...)."""
    day = log_day(rel)
    ids: set[str] = set()
    base = rel.removesuffix(".md")
    part = 1
    while True:
        target = rel if part == 1 else f"{base}.{part}.md"
        try:
            text = store.read(target)
        except MemoryFileNotFoundError:
            if part > 1:
                return ids
            text = ""
        ids.update(r.turn_id for r in parse_session_log(text, day))
        part += 1


def _scope_of(row: LoggedTurn) -> str:
    kind = row.scope_key.partition(":")[0]
    return channel_scope(row.conversation_key) if kind == "conv" else user_scope(row.user_id)


def _entry_of(row: LoggedTurn, at: datetime) -> LogEntry:
    return LogEntry(
        turn_id=row.turn_id, session_id=row.session_id, channel=row.channel, speaker=row.speaker,
        text=row.content, timestamp=at, reply=row.reply, reply_at=row.reply_at,
    )
