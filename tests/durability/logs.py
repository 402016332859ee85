"""What the durability tests compare: the SQLite transcript against the Markdown session logs, read
straight from the data directory (so they also work after the daemon is gone)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from gateway.memory.files.session_log import log_day, parse_session_log


def transcript_turns(data_dir: Path) -> dict[str, str]:
    """turn id -> the user's text, for every message in the transcript."""
    db = sqlite3.connect(f"file:{data_dir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        return {r[0]: r[1] for r in db.execute("SELECT turn_id, content FROM turns WHERE role='user' ORDER BY seq")}
    finally:
        db.close()


def session_logs(data_dir: Path) -> list[Path]:
    return sorted(p for p in data_dir.glob("*/*/sessions/*.md") if p.is_file())


def logged_turns(data_dir: Path) -> Counter[str]:
    """How often each turn id appears in the session logs (any format)."""
    seen: Counter[str] = Counter()
    for path in session_logs(data_dir):
        text = path.read_text(encoding="utf-8", errors="replace")
        seen.update(r.turn_id for r in parse_session_log(text, log_day(path.name)))
    return seen


def missing_from_logs(data_dir: Path) -> list[str]:
    logged = logged_turns(data_dir)
    return [t for t in transcript_turns(data_dir) if t not in logged]


def logged_twice(data_dir: Path) -> list[str]:
    return [t for t, n in logged_turns(data_dir).items() if n > 1]


def answered_turns(data_dir: Path) -> dict[str, tuple[str, str | None]]:
    """turn id -> (the user's text, the reply: None when no reply is stored), for every message."""
    db = sqlite3.connect(f"file:{data_dir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT u.turn_id, u.content, (SELECT a.content FROM turns a WHERE a.turn_id=u.turn_id"
            " AND a.role='assistant' LIMIT 1) FROM turns u WHERE u.role='user' ORDER BY u.seq"
        )
        return {r[0]: (r[1], r[2]) for r in rows}
    finally:
        db.close()


def logged_texts(data_dir: Path) -> list[str]:
    """Each logged turn's text as the index sees it: the message, then ``assistant: <reply>`` when the
    reply is logged."""
    texts: list[str] = []
    for path in session_logs(data_dir):
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.extend(r.text for r in parse_session_log(text, log_day(path.name)))
    return texts
