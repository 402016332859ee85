"""Remembering on a person's request: ``/remember TEXT`` and the ``memory_remember`` tool.

One bullet per request in the person's own ``REMEMBERED.md`` (undated, so recall never decays it and
retention never prunes it; dated by the day it was asked, in the person's timezone), written through
the guarded store with an audit line (``source="remember:<actor>"``). The file is re-indexed before
``remember`` returns, so the very next recall can find it. What the model asks to remember is screened
like every other model-written memory: an instruction-shaped line is refused, not stored. Callers
check Off-The-Record and group rules first (nothing is written in Off-The-Record).
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gateway.memory.edit.match import fold
from gateway.memory.files.poison import screen_text
from gateway.memory.files.scopes import user_scope

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore
    from gateway.services import Services

log = logging.getLogger("kith.memory.remember")

REL = "REMEMBERED.md"
HEADER = "# Remembered\n\nWhat you asked me to remember, one line each. Edit or delete lines freely.\n\n"
MAX_CHARS = 500
_BULLET = re.compile(r"^\s*-\s+(?:\[\d{4}-\d{2}-\d{2}\]\s+)?(.*)$")


@dataclass(frozen=True, slots=True)
class RememberReport:
    status: Literal["remembered", "duplicate", "refused"]
    text: str = ""
    path: str = REL
    line: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "text": self.text, "path": self.path, "line": self.line,
                "message": self.message}  # fmt: skip


def _today(gateway: Services, user_id: str) -> str:
    user = gateway.state.users.get(user_id)
    try:
        tz = ZoneInfo(user.timezone) if user is not None and user.timezone else UTC
    except (ZoneInfoNotFoundError, ValueError):
        tz = UTC
    return datetime.now(tz).date().isoformat()


def _write(store: MemoryStore, line: str, needle: str, *, actor: str, message_id: str, trust: str) -> bool:
    """Append the bullet unless an equal one is there (blocking); False for a duplicate."""
    current = store.read(REL) if store.exists(REL) else ""
    for row in current.splitlines():
        m = _BULLET.match(row)
        if m and fold(m.group(1)) == needle:
            return False
    if not current.strip():
        store.write(REL, HEADER + line + "\n", source=f"remember:{actor}", message_id=message_id, trust=trust)
    else:
        sep = "" if current.endswith("\n") else "\n"
        store.append(REL, sep + line + "\n", source=f"remember:{actor}", message_id=message_id, trust=trust)
    return True


async def remember(gateway: Services, user_id: str, text: str, *, actor: str, trust: str = "user",
                   message_id: str = "") -> RememberReport:  # fmt: skip
    """Keep ``text`` in the person's memory. ``trust="model"`` (a tool call) screens it for instructions."""
    memory = gateway.memory
    if memory is None:
        raise RuntimeError("the gateway's memory is not running")
    text = " ".join((text or "").split())
    if not text:
        return RememberReport("refused", message="Tell me what to remember: /remember TEXT")
    if len(text) > MAX_CHARS:
        return RememberReport("refused", text=text[:80],
                              message=f"That is too long to remember as one line (at most {MAX_CHARS} characters).")
    if trust != "user":
        flagged = screen_text(text)
        if flagged is not None:
            log.warning("remember refused for %s (%s): %s", user_id, actor, flagged)
            return RememberReport("refused", text=text, message="That reads like an instruction to the assistant,"
                                                                 " not a memory; nothing was stored.")  # fmt: skip
    line = f"- [{_today(gateway, user_id)}] {text}"
    store = memory.stores.for_user(user_id)
    added = await asyncio.to_thread(_write, store, line, fold(text), actor=actor, message_id=message_id, trust=trust)
    if not added:
        return RememberReport("duplicate", text=text, message="I already remember that.")
    if not memory.detached:
        await memory.indexing.index_file(user_scope(user_id), REL)  # found by the very next recall
    await gateway.hooks.memory_edited(gateway, user_id=user_id, paths=[REL])
    log.info("remembered a line for %s (%s)", user_id, actor)
    return RememberReport("remembered", text=text, line=line,
                          message=f"Remembered: {text}\n(kept in {REL}; /forget {text[:40]} removes it)")
