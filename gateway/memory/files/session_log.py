"""The session-log format: ``sessions/YYYY-MM-DD.md``, one Markdown block per turn, written and parsed here.

The session-log plugin writes through :func:`format_entry` and the index rebuilds turns with
:func:`parse_session_log`; nothing else knows the format. One block per turn::

    <!-- kith:turn v=2 id=t-123 session=9f0c…e1 channel=telegram speaker=Alice ts=2024-05-01T12:03:22+00:00 … -->
    ## 14:03:22 · telegram · Alice

    **Alice:**
    > I went hiking with Sam yesterday.

    **assistant:**
    > That sounds lovely!

* The marker (an HTML comment, invisible when rendered) carries every exact field: the full turn and
  session ids and the UTC instants of the message and the reply, percent-encoded. The parser reads
  fields only from it: the heading (local time, for people) and the ``**name:**`` lines are decoration.
* Message bodies are quoted: every line of the text, including a line after any character some reader
  treats as a line break (``\\r``, ``\\u2028``...), starts with ``> ``. So no text can put a marker,
  heading, speaker line or turn id at the start of a line; the parser ends a block at the first line
  that is not a quote, a ``**name:**`` line, a blank line or the heading.
* ``parse_entries(format_entry(e)) == [canonical(e)]``, and ``canonical(e) == e`` for any entry whose
  strings hold no lone surrogates (which UTF-8 files cannot hold).

Older formats still parse (files written before this one, possibly in the same file as new blocks):

* the plugin's old block, dated by the file name and the heading's time, with raw text::

    ## 14:03:22 · telegram · session 1a2b3c4d · turn t-123

    **Alice:** I went hiking with Sam yesterday.

* ``### Alice · 14:03 · telegram`` + ``<!-- kith:turn id=… session=… channel=… speaker=… ts=… -->`` +
  raw text (the first marker format, one speaker per block).

A new block can never be read as an old one: its lines are either quoted or structural, and an old
block ends where a marker starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, tzinfo
from urllib.parse import quote, unquote

VERSION = "2"
# Values are percent-encoded (no "=", no space) and fields are space-separated: one way to match a line.
_MARKER = re.compile(r"^<!-- kith:turn ((?:\w+=[^\s=]*\s+)+)-->$")
_PLUGIN_HEAD = re.compile(r"^## (\d{1,2}):(\d{2})(?::(\d{2}))? · (\S+) · session (\S+) · turn (\S+)[ \t]*$")
_SPEAKER_LINE = re.compile(r"^\*\*(.+?):\*\*\s?(.*)$")
_NAME_LINE = re.compile(r"^\*\*.*:\*\*$")
# Every line break of str.splitlines() but "\n": after each of them the next segment is quoted too,
# so a viewer that breaks lines there still sees "> " at the start of every line of a message.
_INNER_BREAK = re.compile("([\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029])> ")
_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
_SURROGATE = re.compile("[\ud800-\udfff]")
ASSISTANT = "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class _TurnFields:
    """Which turn, where, who spoke, what and when: the fields a log block and an index unit share.

    Neither class is the other (an entry's ``text`` is the message alone, a record's the whole turn),
    so they share this base rather than one extending the other.
    """

    turn_id: str
    session_id: str
    channel: str
    speaker: str
    text: str
    timestamp: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRecord(_TurnFields):
    """A turn as the index sees it: one unit of text with its speaker and instant."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEntry(_TurnFields):
    """One turn as the session log holds it: the message and, once stored, the reply.

    ``reply`` is None when the gateway stopped before a reply was stored (the message is kept).
    Instants are UTC (naive values are taken as UTC).
    """

    reply: str | None = None
    reply_at: datetime | None = None

    def record(self) -> TurnRecord:
        """The index's view: message and reply in one unit (an answer makes sense with its question)."""
        text = self.text if self.reply is None else f"{self.text}\n{ASSISTANT}: {self.reply}"
        return TurnRecord(turn_id=self.turn_id, session_id=self.session_id, channel=self.channel,
                          speaker=self.speaker, text=text.strip(), timestamp=self.timestamp)  # fmt: skip


# ------------------------------------------------------------------------------------------ paths


def session_log_path(timestamp: datetime) -> str:
    """Store-relative path of the log that holds a turn, dated in UTC (like the index's turn units)."""
    return f"sessions/{_utc(timestamp):%Y-%m-%d}.md"


def day_log_path(timestamp: datetime, tz: tzinfo) -> str:
    """Where the gateway logs a turn: the day file of the person's own calendar (``tz``)."""
    return f"sessions/{timestamp.astimezone(tz):%Y-%m-%d}.md"


def log_day(rel: str) -> date | None:
    """The day in a log's name (``sessions/2024-05-01.md``, ``sessions/2024-05-01.2.md``)."""
    m = re.search(r"(\d{4}-\d{2}-\d{2})", rel)
    try:
        return date.fromisoformat(m.group(1)) if m else None
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------- writing


def canonical(entry: LogEntry) -> LogEntry:
    """What a log can hold of ``entry``: instants in UTC, lone surrogates (not UTF-8) replaced."""
    clean = {k: _SURROGATE.sub("\ufffd", getattr(entry, k)) for k in ("turn_id", "session_id", "channel",
                                                                         "speaker", "text")}  # fmt: skip
    reply = None if entry.reply is None else _SURROGATE.sub("\ufffd", entry.reply)
    reply_at = None if reply is None or entry.reply_at is None else _utc(entry.reply_at)
    return replace(entry, **clean, timestamp=_utc(entry.timestamp), reply=reply, reply_at=reply_at)


def format_entry(entry: LogEntry, tz: tzinfo = UTC) -> str:
    """The block of one turn (starting with a blank line). ``tz`` only sets the heading's clock."""
    e = canonical(entry)
    fields = {"v": VERSION, "id": e.turn_id, "session": e.session_id, "channel": e.channel,
              "speaker": e.speaker, "ts": e.timestamp.isoformat()}  # fmt: skip
    if e.reply is not None and e.reply_at is not None:
        fields["reply_ts"] = e.reply_at.isoformat()
    meta = " ".join(f"{k}={quote(v, safe=':+')}" for k, v in fields.items())
    who = _one_line(e.speaker)
    head = f"## {e.timestamp.astimezone(tz):%H:%M:%S} · {_one_line(e.channel)} · {who}"
    parts = [f"\n<!-- kith:turn {meta} -->\n{head}\n", f"\n**{who}:**\n{_quote(e.text)}\n"]
    if e.reply is not None:
        parts.append(f"\n**{ASSISTANT}:**\n{_quote(e.reply)}\n")
    return "".join(parts)


def format_turn(*, turn_id: str, session_id: str, channel: str, speaker: str, text: str, timestamp: datetime) -> str:
    """One speaker's message as a block (importers, tools, tests); the same format as the gateway's."""
    return format_entry(LogEntry(turn_id=turn_id, session_id=session_id, channel=channel, speaker=speaker,
                                 text=text, timestamp=timestamp))  # fmt: skip


def _quote(text: str) -> str:
    segments = text.splitlines(keepends=True)
    if not segments or segments[-1].endswith(_BREAKS):
        segments.append("")  # "" and a trailing line break both end in an empty quoted line
    return "".join("> " + s for s in segments)


def _unquote(line: str) -> str:
    body = line[2:] if line.startswith("> ") else line[1:]
    return _INNER_BREAK.sub(r"\1", body)


def _one_line(value: str) -> str:
    """A name as heading text: one line, and no "·" that would make it look like another field."""
    return " ".join(value.replace("·", "-").split()) or "?"


# ----------------------------------------------------------------------------------------- reading


def parse_entries(text: str) -> list[LogEntry]:
    """The blocks of the current format in a log (older blocks and hand-written notes are skipped)."""
    return [e for kind, e in _blocks(text, None) if kind == "v2" and isinstance(e, LogEntry)]


def parse_session_log(text: str, day: date | None = None) -> list[TurnRecord]:
    """Every turn in a session log, in any format; text outside blocks (hand-written notes) is ignored.

    ``day`` (from the file name) dates blocks of the old plugin format, whose headings carry only a time.
    """
    out = []
    for _, block in _blocks(text, day):
        rec = block.record() if isinstance(block, LogEntry) else block
        if rec.turn_id:
            out.append(rec)
    return out


def parse_current(text: str) -> list[TurnRecord] | None:
    """The turns of a log whose blocks are all of the current format, or None when any block is
    older (or an old marker is present). Such a log parses the same in pieces: its text split
    before any marker line parses to the two pieces' turns, in order (the indexer reads only what
    was appended to a log since its last pass)."""
    if _OLD_MARKER.search(text):
        return None
    blocks = _blocks(text, None)
    if any(kind != "v2" for kind, _ in blocks) or _PLUGIN_HEAD_ANY.search(text):
        return None
    out = []
    for _, block in blocks:
        rec = block.record() if isinstance(block, LogEntry) else block
        if rec.turn_id:
            out.append(rec)
    return out


def starts_with_marker(text: str) -> bool:
    """``text`` begins (after blank lines) with a block's marker line: a piece appended to a log."""
    first = text.lstrip("\n").split("\n", 1)[0]
    return _MARKER.match(first) is not None


# Any marker without a version (first format), and any heading of the old plugin format: a log
# holding either is parsed as a whole (their blocks run to the next block, across an append).
_OLD_MARKER = re.compile(r"^<!-- kith:turn (?!(?:\w+=[^\s=]*\s+)*v=)", re.MULTILINE)
_PLUGIN_HEAD_ANY = re.compile(r"^## \d{1,2}:\d{2}(?::\d{2})? · \S+ · session \S+ · turn \S+[ \t]*$", re.MULTILINE)


def _blocks(text: str, day: date | None) -> list[tuple[str, LogEntry | TurnRecord]]:
    lines = text.split("\n")
    starts: list[tuple[str, int, int, dict[str, str] | re.Match[str]]] = []  # kind, first, end, what
    old_markers = any((m := _MARKER.match(ln)) and _fields(m.group(1)).get("v") is None for ln in lines)
    i = 0
    while i < len(lines):
        m = _MARKER.match(lines[i])
        if m is not None:
            fields = _fields(m.group(1))
            if fields.get("v") == VERSION:
                end = _region_end(lines, i + 1)
                starts.append(("v2", i, end, fields))
                i = end
                continue
            if "v" not in fields:
                starts.append(("v1", i, -1, fields))
        elif day is not None and not old_markers and (h := _PLUGIN_HEAD.match(lines[i])) is not None:
            # As before: a file with first-format markers is read by its markers alone.
            starts.append(("plugin", i, -1, h))
        i += 1
    out: list[tuple[str, LogEntry | TurnRecord]] = []
    for n, (kind, first, end, what) in enumerate(starts):
        if end < 0:  # an old block runs to the next block
            end = starts[n + 1][1] if n + 1 < len(starts) else len(lines)
        if kind == "v2" and isinstance(what, dict):
            entry = _v2_entry(what, lines[first + 1 : end])
        elif kind == "v1" and isinstance(what, dict):
            entry = _v1_record(what, lines[first + 1 : end], last=n + 1 == len(starts))
        elif isinstance(what, re.Match) and day is not None:
            entry = _plugin_record(what, lines[first + 1 : end], day)
        else:
            entry = None
        if entry is not None:
            out.append((kind, entry))
    return out


def without_turns(text: str, turn_ids: set[str]) -> tuple[str, int]:
    """``text`` without the blocks (current format) of ``turn_ids``, and how many were removed
    (``kith users delete`` takes a person's turns out of a group conversation's log)."""
    lines = text.split("\n")
    keep: list[str] = []
    removed = 0
    i = 0
    while i < len(lines):
        m = _MARKER.match(lines[i])
        if m is not None:
            fields = _fields(m.group(1))
            if fields.get("v") == VERSION and fields.get("id") in turn_ids:
                i = _region_end(lines, i + 1)
                removed += 1
                continue
        keep.append(lines[i])
        i += 1
    return "\n".join(keep), removed


def _region_end(lines: list[str], i: int) -> int:
    """First line after a marker that is not part of its block."""
    if i < len(lines) and lines[i].startswith("## "):
        i += 1
    while i < len(lines):
        line = lines[i]
        if not (line == "" or line.startswith(">") or _NAME_LINE.match(line)):
            break
        i += 1
    return i


def _v2_entry(fields: dict[str, str], lines: list[str]) -> LogEntry | None:
    sections: list[list[str]] = []
    for line in lines[1:] if lines and lines[0].startswith("## ") else lines:
        if line.startswith(">"):
            if not sections:
                sections.append([])
            sections[-1].append(_unquote(line))
        elif _NAME_LINE.match(line):
            sections.append([])
    try:
        at = _utc(datetime.fromisoformat(fields["ts"]))
        reply_at = _utc(datetime.fromisoformat(fields["reply_ts"])) if "reply_ts" in fields else None
    except (KeyError, ValueError):
        return None  # a damaged marker: skip the block rather than index it wrongly
    reply = "\n".join(sections[1]) if len(sections) > 1 else None
    return LogEntry(turn_id=fields.get("id", ""), session_id=fields.get("session", ""),
                    channel=fields.get("channel", ""), speaker=fields.get("speaker", ""),
                    text="\n".join(sections[0]) if sections else "", timestamp=at, reply=reply,
                    reply_at=reply_at if reply is not None else None)  # fmt: skip


def _v1_record(fields: dict[str, str], lines: list[str], *, last: bool) -> TurnRecord | None:
    # The first format's body is raw: everything up to the next marker but the next block's heading.
    body = "\n" + "\n".join(lines) + ("" if last else "\n")
    body = re.sub(r"\n### [^\n]*\n?\Z", "\n", body).strip()
    try:
        ts = datetime.fromisoformat(fields.get("ts", ""))
    except ValueError:
        return None
    return TurnRecord(turn_id=fields.get("id", ""), session_id=fields.get("session", ""),
                      channel=fields.get("channel", ""), speaker=fields.get("speaker", ""), text=body,
                      timestamp=_utc(ts))  # fmt: skip


def _plugin_record(m: re.Match[str], lines: list[str], day: date) -> TurnRecord | None:
    speakers: list[str] = []
    parts: list[str] = []
    for line in "\n".join(lines).strip().splitlines():
        sm = _SPEAKER_LINE.match(line)
        if sm:
            speakers.append(sm.group(1))
            parts.append(f"{sm.group(1)}: {sm.group(2)}" if parts else sm.group(2))
        elif parts:
            parts[-1] += "\n" + line
    hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if not parts or hour > 23 or minute > 59 or second > 59:
        return None
    # The old plugin wrote the heading in the person's local time: for a non-UTC user this instant is
    # off by the offset (blocks of the current format carry the UTC instant).
    return TurnRecord(turn_id=m.group(6), session_id=m.group(5), channel=m.group(4), speaker=speakers[0],
                      text="\n".join(p.rstrip() for p in parts).strip(),
                      timestamp=datetime.combine(day, time(hour, minute, second), UTC))  # fmt: skip


def _fields(meta: str) -> dict[str, str]:
    out = {}
    for part in meta.split():
        key, _, value = part.partition("=")
        out[key] = unquote(value)
    return out


def _utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


# A silent scheduled prompt (CRONS.json ``"silent": true``, seed 004: a high-volume retrieve-and-render
# job) runs on a conversation whose id ends so: its turns stay in the transcript (history, /api) but
# are never written to the Markdown log, so they are neither indexed nor recalled.
SILENT_SUFFIX = "~silent"


def unlogged(conversation_key: str) -> bool:
    """Whether the turns of ``conversation_key`` stay out of the session log (a silent scheduled prompt's)."""
    return conversation_key.endswith(SILENT_SUFFIX)
