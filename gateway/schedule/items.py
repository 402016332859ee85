"""The three files a person's schedule lives in, read leniently and never silently.

``REMINDERS.md``, one reminder a line (the visible part is for people, the comment for the scheduler)::

    - [ ] 2026-05-10 09:00 (Europe/Berlin) call Sam <!-- reminder id=r1a2b3c due=2026-05-10T07:00:00Z -->
    - [ ] every weekday at 08:00 (Europe/Berlin) stand-up <!-- reminder id=r9f0e1d rule="rrule:FREQ=WEEKLY;..." -->
    - [ ] 2026-12-01 09:00 dentist                       (added by hand: gets an id when read)
    - [ ] every Monday at 9: water the plants           (by hand: phrase, a colon, the text)

``[ ]`` pending, ``[x]`` sent (a recurring reminder stays ``[ ]`` and records ``last=``), ``[-]`` cancelled.
The visible time wins over the comment when both parse and differ: that is what a person edits.
A one-shot time is in the zone written on its line; a recurring reminder follows the person's zone.

``CRONS.json``: ``{"crons": [{"id", "when", "prompt", "rule"?, "enabled"?, "last_run"?, "silent"?}]}``; ``when``
is a phrase or rule, ``rule`` what it was understood as; ``"silent": true`` keeps the prompt's turns out
of the session log and the memory index. ``TASKS.json``: the tasks tool's file; an open task
with ``due`` (``2026-05-12`` = 09:00 that day, or ``2026-05-12T17:00``, local) alerts once (``alerted``).

Anything that looks like an item but cannot be scheduled is a ``Problem`` (file, line, why), kept in the
file as it is and reported to the person once.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time
from typing import Any, Literal
from zoneinfo import ZoneInfo

from gateway.schedule.rules import Recurrence, RuleError, next_occurrence, parse_phrase, parse_stored
from gateway.schedule.zones import to_instant, valid_zone, zone

REMINDERS, CRONS, TASKS = "REMINDERS.md", "CRONS.json", "TASKS.json"
FILES = (REMINDERS, CRONS, TASKS)
REMINDERS_HEADER = "# Reminders\n\n"
Kind = Literal["reminder", "prompt", "task"]
_ITEM = re.compile(r"^\s*[-*] \[(?P<mark>[ xX-])\]\s*(?P<rest>.*)$")
_COMMENT = re.compile(r"\s*<!--\s*reminder\b(?P<fields>.*?)-->\s*$")
_FIELD = re.compile(r'(\w+)=("[^"]*"|\S+)')
_ONE_SHOT = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})(?:[ T](?P<time>\d{1,2}:\d{2}))?\s*(?:\((?P<tz>[^)]+)\))?\s*"
                       r"(?P<what>.*)$")
_RECURRING_VISIBLE = re.compile(r"^(?P<phrase>.+?)\s*\((?P<tz>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*)\)\s+(?P<what>.+)$")
# "every day at 02:30: text": the phrase ends at the first colon followed by a space (not a time's)
_RECURRING_HAND = re.compile(r"^(?P<phrase>(?:every|each|daily|weekly|monthly|hourly|yearly|on)\b.*?):\s+"
                             r"(?P<what>.+)$", re.I)
#: A scheduled prompt's ``kind``: a turn on its prompt, or the person's briefing (plugins/briefing.py).
#: Without a ``kind``, a prompt that asks for a briefing ("every weekday at 8 give me a briefing") is one.
PROMPT_KINDS = ("prompt", "briefing")
_BRIEFING = re.compile(r"\bbriefing\b", re.I)
DUE_TIME = time(9, 0)  # a task due on a date alerts at 09:00 local that day
STAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    line: int  # 1-based line (REMINDERS.md) or entry number (the JSON files); 0 = the whole file
    message: str
    text: str = ""

    @property
    def key(self) -> str:
        """Same problem, same key: reported once however often the file is read."""
        return hashlib.sha256(f"{self.file}\0{self.message}\0{self.text}".encode()).hexdigest()[:16]

    def describe(self) -> str:
        where = f"{self.file} line {self.line}" if self.file == REMINDERS and self.line else \
            f"{self.file} entry {self.line}" if self.line else self.file
        return f"{where}: {self.message}" + (f" ({self.text.strip()[:120]!r})" if self.text else "")


@dataclass(frozen=True, slots=True)
class Item:
    kind: Kind
    id: str
    text: str  # what to say (reminder, task) or the prompt to run
    status: str  # pending | sent | cancelled | done | disabled
    due: datetime | None = None  # one-shot instant (UTC)
    rule: Recurrence | None = None
    last: datetime | None = None  # last occurrence fired (recurring), or when sent
    since: datetime | None = None  # occurrences strictly after this instant (creation)
    zone: str = ""  # a zone written on the item; "" = the person's
    when: str = ""  # as shown ("2026-05-10 09:00", "every weekday at 08:00")
    origin: str = ""  # the conversation it was set in ("websocket:phone"): delivered there first
    action: str = ""  # a scheduled prompt's kind: "" = a turn on its prompt, "briefing" = the briefing
    silent: bool = False  # a scheduled prompt kept out of the session log and the index ("silent": true)

    @property
    def active(self) -> bool:
        return self.status == "pending"

    def next_due(self, tz: ZoneInfo, now: datetime) -> datetime | None:
        """When this item is next due (may be <= now: overdue), None when it never is again."""
        if not self.active:
            return None
        if self.rule is None:
            return self.due
        base = self.last or self.since or now
        return next_occurrence(self.rule, zone(self.zone, tz.key) if self.zone else tz, base)


@dataclass(slots=True)
class Parsed:
    items: list[Item] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    text: str = ""  # the file as it should now be (hand-added lines given ids); == input when unchanged


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime(STAMP)


def _instant(raw: str) -> datetime:
    value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def to_local_minute(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)


def stable_id(prefix: str, text: str) -> str:
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:8]


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(4)


# ------------------------------------------------------------------------------------ REMINDERS.md

def reminder_line(item: Item, tz_name: str) -> str:
    """The canonical line of a reminder (what the tool writes, and what a hand line becomes)."""
    mark = {"pending": " ", "sent": "x", "cancelled": "-"}.get(item.status, " ")
    fields = [f"id={item.id}"]
    if item.origin and " " not in item.origin:
        fields.append(f"to={item.origin}")
    if item.rule is not None:
        fields.append(f'rule="{item.rule.text}"')
        if item.rule.since:
            fields.append(f"since_date={item.rule.since.isoformat()}")
        if item.since:
            fields.append(f"since={stamp(item.since)}")
        if item.last:
            fields.append(f"last={stamp(item.last)}")
    else:
        assert item.due is not None
        fields.append(f"due={stamp(item.due)}")
        if item.last:
            fields.append(f"sent={stamp(item.last)}")
    return f"- [{mark}] {item.when} ({item.zone or tz_name}) {item.text} <!-- reminder {' '.join(fields)} -->"


def parse_reminders(text: str, tz_name: str, now: datetime) -> Parsed:
    """Every reminder line of ``REMINDERS.md``; a hand line gets its id and comment in ``Parsed.text``."""
    out = Parsed()
    lines = text.splitlines()
    new_lines = []
    for n, line in enumerate(lines, 1):
        m = _ITEM.match(line)
        if not m:
            new_lines.append(line)
            continue
        try:
            item, canonical = _reminder(m["mark"], m["rest"], tz_name, now)
        except (RuleError, ValueError) as exc:
            out.problems.append(Problem(REMINDERS, n, str(exc), line))
            new_lines.append(line)  # kept exactly as it is
            continue
        if item is not None:
            out.items.append(item)
        new_lines.append(canonical if canonical is not None else line)
    out.text = "\n".join(new_lines) + ("\n" if text.endswith("\n") or not text else "")
    if out.text == "\n" and not text:
        out.text = ""
    if new_lines == lines:
        out.text = text
    return out


def _reminder(mark: str, rest: str, tz_name: str, now: datetime) -> tuple[Item | None, str | None]:
    status = {" ": "pending", "x": "sent", "X": "sent", "-": "cancelled"}[mark]
    cm = _COMMENT.search(rest)
    visible = rest[: cm.start()].strip() if cm else rest.strip()
    fields = {k: v.strip('"') for k, v in _FIELD.findall(cm["fields"])} if cm else {}
    if not cm and status != "pending":
        return None, None  # a done line written by hand: nothing to schedule, nothing wrong
    rid = fields.get("id") or stable_id("r", visible)  # the same hand line has the same id until it is written
    if not re.fullmatch(r"r[0-9a-zA-Z_-]{1,40}", rid):
        raise ValueError(f"bad reminder id {rid!r}")
    last = _instant(fields["last"]) if "last" in fields else (_instant(fields["sent"]) if "sent" in fields else None)
    since = _instant(fields["since"]) if "since" in fields else None
    origin = fields.get("to", "")
    # One-shot: a visible date wins over the comment's due (that is what a person edits).
    one = _ONE_SHOT.match(visible)
    if one and one["what"].strip():
        zone_name = (one["tz"] or "").strip()
        if zone_name and not valid_zone(zone_name):
            raise ValueError(f"unknown time zone {zone_name!r}")
        tz = zone(zone_name or tz_name)
        local = datetime.combine(date.fromisoformat(one["date"]),
                                 time.fromisoformat(f"{int(one['time'].split(':')[0]):02d}:{one['time'].split(':')[1]}")
                                 if one["time"] else DUE_TIME)
        due = to_instant(local, tz)
        if "due" in fields and to_local_minute(_instant(fields["due"]), tz) == local:
            due = _instant(fields["due"])  # same wall time: keep the exact instant (a fold=1 time set by minutes)
        item = Item("reminder", rid, one["what"].strip(), status, due=due, last=last, zone=zone_name,
                    when=f"{local:%Y-%m-%d %H:%M}", origin=origin)
        canonical = reminder_line(item, zone_name or tz_name)
        return item, (canonical if canonical != f"- [{mark}] {rest}".rstrip() and (not cm or _changed(fields, item))
                      else None)
    rec, what, zone_name = None, "", ""
    vis = _RECURRING_VISIBLE.match(visible)
    hand = _RECURRING_HAND.match(visible)
    since_date = date.fromisoformat(fields["since_date"]) if "since_date" in fields else None
    if vis and valid_zone(vis["tz"]):
        stored = None
        if "rule" in fields:
            try:
                stored = parse_stored(fields["rule"], since_date)
            except RuleError:
                stored = None
        if stored is not None and stored.describe() == vis["phrase"].strip():
            rec = stored  # the words are the rule's own: the exact rule (a yearly date, a cron) stands
        else:
            try:
                rec = parse_phrase(vis["phrase"], today=since_date)
            except RuleError:
                rec = None
        what, zone_name = vis["what"].strip(), vis["tz"]
    elif hand:
        rec = parse_phrase(hand["phrase"], today=now.date())
        what = hand["what"].strip()
    if rec is None and "rule" in fields:
        rec = parse_stored(fields["rule"], since_date)
        what = what or visible
    if rec is None:
        if "due" in fields:  # the visible part is prose only: the comment still says when
            due = _instant(fields["due"])
            item = Item("reminder", rid, visible, status, due=due, last=last, when="", origin=origin)
            return item, None
        raise ValueError("no date or repetition I can read; write e.g. '2026-05-10 09:00 call Sam' or "
                         "'every Monday at 9: water the plants'")
    if since_date and rec.since is None and rec.kind == "rrule":
        rec = replace(rec, since=since_date)
    # A recurring reminder follows the person's zone (after /tz it runs in the new one); the zone on
    # the line is re-written to say so.
    item = Item("reminder", rid, what, status, rule=rec, last=last, since=since or now, when=rec.describe(),
                origin=origin)
    if cm and fields.get("rule") == rec.text and "since" in fields and zone_name == tz_name:
        return item, None
    return item, reminder_line(item, tz_name)


def _changed(fields: dict[str, str], item: Item) -> bool:
    return item.due is not None and fields.get("due") != stamp(item.due)


def set_reminder(text: str, rid: str, **changes: Any) -> tuple[str, bool]:
    """Rewrite reminder ``rid``'s line with ``changes`` (status, last); other lines untouched."""
    out, changed = [], False
    for line in text.splitlines():
        m = _ITEM.match(line)
        cm = _COMMENT.search(m["rest"]) if m else None
        if m and cm and dict(_FIELD.findall(cm["fields"])).get("id") == rid:
            fields = {k: v.strip('"') for k, v in _FIELD.findall(cm["fields"])}
            mark = m["mark"]
            if "status" in changes:
                mark = {"pending": " ", "sent": "x", "cancelled": "-"}[changes["status"]]
            if "last" in changes:
                key = "last" if "rule" in fields else "sent"
                fields[key] = stamp(changes["last"])
            body = " ".join(f'{k}="{v}"' if " " in v or ";" in v else f"{k}={v}" for k, v in fields.items())
            line = f"- [{mark}] {m['rest'][: cm.start()].strip()} <!-- reminder {body} -->"
            changed = True
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), changed


# ------------------------------------------------------------------------------ CRONS.json, TASKS.json

def _json_list(raw: str, rel: str, key: str, out: Parsed) -> tuple[Any, list[Any] | None]:
    """The file's JSON and its ``key`` list (``{"crons": [...]}`` or a bare list); None (and a problem
    in ``out`` unless the file is empty) when there is no list to read."""
    if not raw.strip():
        return None, None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        out.problems.append(Problem(rel, 0, f"not valid JSON ({exc})"))
        return None, None
    entries = data.get(key) if isinstance(data, dict) else data
    if not isinstance(entries, list):
        out.problems.append(Problem(rel, 0, f'no "{key}" list'))
        return data, None
    return data, entries


def parse_crons(raw: str, tz_name: str, now: datetime) -> Parsed:
    out = Parsed(text=raw)
    data, entries = _json_list(raw, CRONS, "crons", out)
    if entries is None:
        return out
    changed = False
    for n, entry in enumerate(entries, 1):
        shown = json.dumps(entry, ensure_ascii=False)[:200]
        if not isinstance(entry, dict):
            out.problems.append(Problem(CRONS, n, "an entry must be an object", shown))
            continue
        prompt = entry.get("prompt")
        when = entry.get("when") or entry.get("rule")
        if not isinstance(prompt, str) or not prompt.strip():
            out.problems.append(Problem(CRONS, n, 'no "prompt" to run', shown))
            continue
        if not isinstance(when, str) or not when.strip():
            out.problems.append(Problem(CRONS, n, 'no "when" (e.g. "every weekday at 8")', shown))
            continue
        entry_zone = entry.get("timezone") or ""
        if entry_zone and (not isinstance(entry_zone, str) or not valid_zone(entry_zone)):
            out.problems.append(Problem(CRONS, n, f"unknown time zone {entry_zone!r}", shown))
            continue
        try:
            rec = parse_phrase(when, today=now.date())
            last = _instant(entry["last_run"]) if entry.get("last_run") else None
            since = _instant(entry["created"]) if entry.get("created") else None
        except (RuleError, ValueError) as exc:
            out.problems.append(Problem(CRONS, n, str(exc), shown))
            continue
        if not entry.get("id"):
            entry["id"], changed = stable_id("c", shown), True
        if entry.get("rule") != rec.text:
            entry["rule"], changed = rec.text, True
        if since is None:
            entry["created"], changed, since = stamp(now), True, now
        kind = entry.get("kind")
        if kind is not None and kind not in PROMPT_KINDS:
            out.problems.append(Problem(CRONS, n, f"unknown kind {kind!r} (one of {', '.join(PROMPT_KINDS)})",
                                        shown))  # fmt: skip
            continue
        action = kind if kind is not None else ("briefing" if _BRIEFING.search(prompt) else "prompt")
        status = "pending" if entry.get("enabled", True) is not False else "disabled"
        out.items.append(Item("prompt", str(entry["id"]), prompt.strip(), status, rule=rec, last=last, since=since,
                              zone=entry_zone, when=rec.describe(), action="" if action == "prompt" else action,
                              silent=entry.get("silent") is True))
    if changed:
        out.text = json.dumps({"crons": entries} if isinstance(data, dict) else entries, ensure_ascii=False,
                              indent=2) + "\n"
    return out


# -------------------------------------------------------------------------------------- TASKS.json

def parse_tasks(raw: str, tz_name: str, now: datetime) -> Parsed:
    out = Parsed(text=raw)
    _, tasks = _json_list(raw, TASKS, "tasks", out)
    if tasks is None:
        return out
    tz = zone(tz_name)
    for n, task in enumerate(tasks, 1):
        if not isinstance(task, dict) or not task.get("due") or task.get("alert") is False:
            continue  # no due date, or its alert cancelled (``kith schedule cancel``)
        shown = json.dumps(task, ensure_ascii=False)[:200]
        try:
            due = task_due(str(task["due"]), tz)
            alerted = _instant(task["alerted"]) if task.get("alerted") else None
        except ValueError:
            out.problems.append(Problem(TASKS, n, f"due {task['due']!r} is not a date (2026-05-12) or date and "
                                        "time (2026-05-12T17:00)", shown))
            continue
        status = "done" if task.get("status") == "done" else ("sent" if alerted else "pending")
        out.items.append(Item("task", str(task.get("id") or f"t{n}"), str(task.get("text", "")), status, due=due,
                              last=alerted, when=str(task["due"])))
    return out


def task_due(raw: str, tz: ZoneInfo) -> datetime:
    """``2026-05-12`` (09:00 local), ``2026-05-12T17:00`` (local) or an instant with an offset."""
    raw = raw.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw):
        return to_instant(datetime.combine(date.fromisoformat(raw), DUE_TIME), tz)
    value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return value.astimezone(UTC) if value.tzinfo else to_instant(value, tz)


def _set_field(raw: str, key: str, entry_id: str, name: str, value: str, *, once: bool) -> tuple[str, bool]:
    """Set ``name`` on the entry ``entry_id`` of the file's ``key`` list (``once``: only if unset)."""
    data, entries = _json_list(raw, "", key, Parsed())
    for entry in entries or []:
        if isinstance(entry, dict) and str(entry.get("id")) == entry_id and not (once and entry.get(name)):
            entry[name] = value
            return json.dumps(data, ensure_ascii=False, indent=2) + "\n", True
    return raw, False


def mark_task_alerted(raw: str, task_id: str, when: datetime) -> tuple[str, bool]:
    return _set_field(raw, "tasks", task_id, "alerted", stamp(when), once=True)


def mark_cron_run(raw: str, cron_id: str, when: datetime) -> tuple[str, bool]:
    return _set_field(raw, "crons", cron_id, "last_run", stamp(when), once=False)


PARSERS = {REMINDERS: parse_reminders, CRONS: parse_crons, TASKS: parse_tasks}
