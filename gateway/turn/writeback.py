"""Answered turns the transcript could not take: kept in the turn spool, written back when it can.

The turn path (``gateway/turn/protocol.py``) hands a turn here when storing it failed after the reply
(``keep``). Written to the spool (``gateway/turn/spool.py``), the turn survives a stop, a SIGKILL and a
restart on the still-full disk; if even that fails, ``keep`` says so and the person is told in the
reply that this exchange is not kept. Nothing answered is lost without a word.

Write-back: at start, before the plugins start (so the session log's start-up catch-up, which reads
the transcript, finds the turns and appends them to the Markdown log, which the index follows), then
in the background while any is left, with backoff, and at once when a later turn's writes succeed.
It is idempotent per turn (only the rows missing for the turn id are added: the message may have been
stored before the model call), so a write-back cut short is simply done again. The spool is emptied
only when every record of it is in the transcript. A record whose session no longer exists (the
person was erased meanwhile) is dropped, not resurrected.

What the session log could not write of spooled turns from an earlier run is queued by the session
log's start-up from ``unstored()`` (the transcript does not hold them yet, so its catch-up cannot).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from gateway.state import StorageError, TranscriptEntry
from gateway.turn.spool import SpooledTurn, TurnSpool
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.spool")

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 2.0  # a failed attempt is one refused INSERT: cheap enough to retry often
NOT_KEPT_NOTE = ("(Note: this exchange could not be saved, because the server's disk is full, so I will not"
                 " remember it. The operator can see this in kith's health check.)")


class WriteBack:
    def __init__(self, gateway: Services, spool: TurnSpool) -> None:
        self.gateway = gateway
        self.spool = spool
        self.stored: set[str] = set()  # turn ids of the spool already in the transcript (a partial write-back)
        self.kept = 0  # turns spooled by this run
        self.not_kept = 0  # turns neither stored nor spooled since the last stored one: their person was told
        self.not_kept_total = 0
        self.written = 0  # turns written back by this run
        self.last_error = ""
        self.wake = asyncio.Event()
        self.delay = RETRY_FIRST_S
        self.task: asyncio.Task[None] | None = None

    # --------------------------------------------------------------------------------- keeping

    def keep(self, turn: SpooledTurn) -> bool:
        """Spool a turn whose transcript write failed; False when it could not be kept either."""
        if self.spool.add(turn):
            self.kept += 1
            self.wake.set()  # the write-back loop starts its retries (with backoff: the disk is full now)
            if self.kept == 1 or self.kept % 100 == 0:
                log.warning("turn %s kept in the turn spool %s (%d kept, %d bytes left); it is written back to"
                            " the transcript when it takes writes again", turn.turn_id, self.spool.path,
                            self.kept, self.spool.free())  # fmt: skip
            return True
        self.not_kept += 1
        self.not_kept_total += 1
        if self.not_kept_total > 1 and self.not_kept_total % 100:
            return False  # the first and every 100th: one line per turn would flood the log
        log.error("turn %s was answered but could not be stored nor spooled (%s): its person is told it is not"
                  " kept (%d such turns in this run; logged once per 100)", turn.turn_id,
                  "no spool" if not self.spool.usable else "spool full or failing", self.not_kept_total)
        return False

    def unstored(self) -> list[SpooledTurn]:
        """Spooled turns the transcript does not hold yet, oldest first."""
        return [t for t in self.spool.records if t.turn_id not in self.stored]

    def writes_succeed(self) -> None:
        """A turn was just stored: the turns not kept are history (logged), and a write-back is tried
        now instead of after the backoff."""
        self.not_kept = 0
        if self.spool.records:
            self.delay = RETRY_FIRST_S
            self.wake.set()

    # ------------------------------------------------------------------------------ writing back

    def write_back(self) -> bool:
        """Write every spooled turn the transcript lacks; True when the spool is empty afterwards."""
        if not self.spool.records:
            return True
        done = 0
        for turn in self.unstored():
            try:
                self._store(turn)
            except StorageError as exc:
                self.last_error = str(exc)
                if done:
                    log.warning("wrote back %d spooled turns, then: %s; the rest is retried", done, exc)
                return False
            self.stored.add(turn.turn_id)
            done += 1
        try:
            self.spool.clear()
        except OSError as exc:  # written back (idempotent): emptying the spool is retried later
            self.last_error = f"emptying the turn spool: {exc}"
            return False
        self.written += done
        self.stored.clear()
        self.last_error = ""
        log.warning("wrote back %d spooled turns to the transcript; the turn spool is empty again", done)
        return True

    def _store(self, t: SpooledTurn) -> None:
        state = self.gateway.state
        session = state.sessions.get(t.session_id)
        if session is None:
            log.error("spooled turn %s: its session no longer exists (erased meanwhile); not written back",
                      t.turn_id)
            return
        roles = state.turns.roles_of(t.session_id, t.turn_id)
        rows = []
        if "user" not in roles:
            rows.append(TranscriptEntry(turn_id=t.turn_id, session_id=t.session_id, user_id=t.user_id, role="user",
                                        content=t.text, channel=t.channel, conversation_key=t.conversation_key,
                                        speaker=t.speaker, created_at=t.at))  # fmt: skip
        if "assistant" not in roles:
            rows.append(TranscriptEntry(turn_id=t.turn_id, session_id=t.session_id, user_id=t.user_id,
                                        role="assistant", content=t.reply, channel=t.channel,
                                        conversation_key=t.conversation_key, speaker="assistant",
                                        created_at=t.reply_at))  # fmt: skip
        if rows:
            with state.tx():
                state.turns.append(*rows)
                if t.reply_at > session.last_active_at:
                    state.sessions.touch(t.session_id, t.reply_at)
        if t.message_id:
            state.dedupe.mark_seen(t.channel, t.message_id, t.at)
        if t.conversation_id:
            state.conversations.remember(conversation_key=t.conversation_key, channel=t.channel,
                                         conversation_id=t.conversation_id, kind=t.kind, user_id=t.user_id,
                                         persona=t.persona, at=t.at)  # fmt: skip

    async def run(self) -> None:
        """Retry the write-back while anything is spooled: backoff from 0.5 s to 2 s, or at once
        when a turn's writes succeed (``writes_succeed``)."""
        while True:
            if not self.spool.records:
                self.wake.clear()
                await self.wake.wait()
                continue
            try:
                if self.write_back():
                    self.delay = RETRY_FIRST_S
                    continue
            except Exception as exc:  # a bug must not end the retries: the turns stay spooled
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("turn spool: the write-back failed")
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.delay)
            self.delay = min(self.delay * 2, RETRY_MAX_S)

    # ------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """At gateway start, before the plugins: open the spool and write back what an earlier run left."""
        if not self.spool.open():
            return
        left = len(self.spool.records)
        if left:
            log.warning("turn spool %s holds %d answered turns an earlier run could not store; writing them back",
                        self.spool.path, left)
            started = time.monotonic()
            if not self.write_back():
                log.warning("turn spool: %d turns still wait for the transcript (%s); retried in the background",
                            len(self.unstored()), self.last_error)
            else:
                log.info("turn spool written back in %.2f s", time.monotonic() - started)

    def serve(self) -> None:
        if self.spool.usable and self.task is None:
            self.task = asyncio.create_task(self.run(), name="turn-spool:write-back")

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None
        if self.spool.records:
            self.write_back()  # one last try: what is left waits in the spool for the next start
        self.spool.close()

    def problem(self) -> str | None:
        """A ``/healthz`` line while turns wait in the spool or were not kept."""
        parts = []
        waiting = len(self.unstored())
        if waiting:
            last = f"; last: {self.last_error}" if self.last_error else ""
            parts.append(f"{waiting} answered turns wait in the turn spool for the transcript"
                         f" ({self.spool.free() // 1024} KB of spool left{last})")
        if self.not_kept:
            parts.append(f"{self.not_kept} answered turns could not be kept (their people were told)")
        return "; ".join(parts) or None


WRITE_BACK: StashKey[WriteBack] = StashKey()


def write_back_of(gateway: Services) -> WriteBack | None:
    """The gateway's write-back (``None``: a gateway that answers no turns, or before its start)."""
    return gateway.stash.get(WRITE_BACK)
