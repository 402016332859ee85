"""The session-log format: ``users/<id>/sessions/YYYY-MM-DD.md``, one Markdown block per turn.

The log is what the index of transcript turns is rebuilt from, so each block carries every field
the index needs in an HTML comment (invisible when the Markdown is rendered)::

    ### Alice · 14:03 · telegram
    <!-- kith:turn id=t-123 session=s-9 channel=telegram speaker=Alice ts=2024-05-01T14:03:22+00:00 -->
    I went hiking with Sam yesterday.

Field values are percent-encoded (``quote``) so spaces in names survive the round trip.

The gateway's session-log plugin writes a simpler block per exchange, which is parsed as well (the
day comes from the file name, the time from the heading)::

    ## 14:03:22 · telegram · session 1a2b3c4d · turn t-123

    **Alice:** I went hiking with Sam yesterday.

    **assistant:** That sounds lovely!
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from urllib.parse import quote, unquote

_MARK = re.compile(r"^<!-- kith:turn ((?:\w+=\S*\s*)+)-->$", re.MULTILINE)
_FIELDS = ("id", "session", "channel", "speaker", "ts")
_PLUGIN_HEAD = re.compile(
    r"^## (\d{1,2}):(\d{2})(?::(\d{2}))? · (\S+) · session (\S+) · turn (\S+)[ \t]*$", re.MULTILINE
)
_SPEAKER_LINE = re.compile(r"^\*\*(.+?):\*\*\s?(.*)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRecord:
    turn_id: str
    session_id: str
    channel: str
    speaker: str
    text: str
    timestamp: datetime


def session_log_path(timestamp: datetime) -> str:
    """Store-relative path of the log that holds a turn (dated in UTC, like the index)."""
    return f"sessions/{_utc(timestamp):%Y-%m-%d}.md"


def format_turn(*, turn_id: str, session_id: str, channel: str, speaker: str, text: str, timestamp: datetime) -> str:
    ts = _utc(timestamp)
    values = dict(zip(_FIELDS, (turn_id, session_id, channel, speaker, ts.isoformat()), strict=True))
    meta = " ".join(f"{k}={quote(v, safe='')}" for k, v in values.items())
    # A line starting with the marker inside the text would split the turn: indent it.
    body = re.sub(r"^<!-- kith:turn", " <!-- kith:turn", text.strip(), flags=re.MULTILINE)
    # The heading is for human readers (exact values live in the marker): keep it on one line.
    head = " ".join(f"{' '.join(speaker.split())} · {ts:%H:%M} · {' '.join(channel.split())}".split())
    return f"\n### {head}\n<!-- kith:turn {meta} -->\n{body}\n"


def parse_session_log(text: str, day: date | None = None) -> list[TurnRecord]:
    """Every turn block in a session log; text outside blocks (hand-written notes) is ignored.

    ``day`` (from the file name) dates blocks of the plugin format, whose headings carry only a time.
    """
    if "<!-- kith:turn" not in text:
        return _parse_plugin_log(text, day) if day is not None else []
    marks = list(_MARK.finditer(text))
    out: list[TurnRecord] = []
    for i, m in enumerate(marks):
        fields = dict(part.split("=", 1) for part in m.group(1).split())
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[m.end() : end]
        # Drop the next block's "### speaker" heading, which sits between this body and the marker.
        body = re.sub(r"\n### [^\n]*\n?\Z", "\n", body).strip()
        try:
            ts = datetime.fromisoformat(unquote(fields.get("ts", "")))
        except ValueError:
            continue  # a damaged marker: skip the block rather than index it wrongly
        out.append(
            TurnRecord(
                turn_id=unquote(fields.get("id", "")),
                session_id=unquote(fields.get("session", "")),
                channel=unquote(fields.get("channel", "")),
                speaker=unquote(fields.get("speaker", "")),
                text=body,
                timestamp=_utc(ts),
            )
        )
    return [t for t in out if t.turn_id]


def _parse_plugin_log(text: str, day: date) -> list[TurnRecord]:
    heads = list(_PLUGIN_HEAD.finditer(text))
    out = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        speakers: list[str] = []
        lines: list[str] = []
        for line in text[m.end() : end].strip().splitlines():
            sm = _SPEAKER_LINE.match(line)
            if sm:
                speakers.append(sm.group(1))
                lines.append(f"{sm.group(1)}: {sm.group(2)}" if lines else sm.group(2))
            elif lines:
                lines[-1] += "\n" + line
        hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
        if not lines or hour > 23 or minute > 59 or second > 59:
            continue
        out.append(
            TurnRecord(
                turn_id=m.group(6),
                session_id=m.group(5),
                channel=m.group(4),
                speaker=speakers[0],
                text="\n".join(line.rstrip() for line in lines).strip(),
                timestamp=datetime.combine(day, time(hour, minute, second), UTC),
            )
        )
    return out


def _utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
