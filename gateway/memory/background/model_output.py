"""Parsing model output for background memory, without ever raising on what the model wrote.

Two answers, each as labelled sections (a cut-off reply then still yields its first parts) or, where
the provider enforces structured output, as one JSON object of ``schemas`` (``json_answer``):

* nightly extraction: ``MEMORIES:`` (bullets), ``FACTS:`` (JSON list of triples), ``TOPICS:``
  (JSON map topic -> weight);
* memory writer: ``SUMMARY:`` (Markdown), ``PEOPLE:`` and ``TOPICS:`` (JSON lists of file updates, each
  a list of ``ops``; a ``content`` note, the old shape, is kept for the writer to merge without loss).

Labels may be bold, ``#``-headed, any case; JSON may sit in code fences. Bad JSON is salvaged object
by object; missing sections, oversize input (hard cap, then cut) and invalid items are reported in
``errors`` and skipped. Callers decide from the result whether to write, retry or dead-letter.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gateway.memory.knowledge.predicates import normalize_predicate
from gateway.memory.knowledge.timestamps import to_db

MAX_INPUT_CHARS = 64_000  # about 10x a normal night's output; beyond it the tail is dropped unread
MAX_MEMORIES, MAX_FACTS, MAX_TOPICS, MAX_FILES = 60, 100, 20, 20
MAX_LINE_CHARS, MAX_ENTITY_CHARS, MAX_FILE_CHARS = 400, 300, 8_000

_LABEL = re.compile(r"^[ \t]*(?:#{1,4}[ \t]*)?(?:\*\*|__)?([A-Za-z]+)(?:\*\*|__)?[ \t]*:(?:\*\*|__)?[ \t]*(.*)$")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
_NONE = {"none", "n/a", "(none)", "nothing", "-", "nothing new", "no new memories"}


@dataclass(frozen=True, slots=True, kw_only=True)
class FactTriple:
    subject: str
    predicate: str
    object: str
    valid_from: str | None = None  # canonical form of knowledge.timestamps
    valid_until: str | None = None
    confidence: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Extraction:
    memories: tuple[str, ...] = ()
    facts: tuple[FactTriple, ...] = ()
    topics: dict[str, float] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    truncated: bool = False

    @property
    def empty(self) -> bool:
        return not (self.memories or self.facts or self.topics)

    def dominant_topic(self) -> str | None:
        return max(self.topics.items(), key=lambda kv: (kv[1], kv[0]))[0] if self.topics else None


@dataclass(frozen=True, slots=True, kw_only=True)
class FileUpdate:
    slug: str  # file name stem: people/<slug>.md, topics/<slug>.md
    title: str
    content: str = ""  # a whole note ("the complete new Markdown"): only ever merged in, never a rewrite
    aliases: tuple[str, ...] = ()
    ops: tuple[Any, ...] | None = None  # line edits (curation op shapes), validated when applied


@dataclass(frozen=True, slots=True, kw_only=True)
class WriterOutput:
    summary: str = ""
    people: tuple[FileUpdate, ...] = ()
    topics: tuple[FileUpdate, ...] = ()
    errors: tuple[str, ...] = ()
    truncated: bool = False


def split_sections(text: Any, names: tuple[str, ...], errors: list[str]) -> tuple[dict[str, str], bool]:
    """Body text of each known label (first occurrence wins); also whether input hit the size cap."""
    if not isinstance(text, str):
        errors.append(f"output is {type(text).__name__}, not text")
        return {}, False
    truncated = len(text) > MAX_INPUT_CHARS
    if truncated:
        errors.append(f"output has {len(text)} characters; only the first {MAX_INPUT_CHARS} were read")
        text = text[:MAX_INPUT_CHARS]
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.replace("\r\n", "\n").split("\n"):
        m = _LABEL.match(line)
        name = m.group(1).upper() if m else ""
        if m and m.group(1) != name and m.group(2).strip() and not m.group(2).lstrip().startswith(("[", "{", "`")):
            name = ""  # "Topics: we discussed..." inside a summary is prose; "TOPICS:" or "Topics:" is a label
        if m and name in names:
            if name in found:
                errors.append(f"section {name} repeated; later copy ignored")
                current = None
            else:
                current = found[name] = [m.group(2)]
            continue
        if current is not None:
            current.append(line)
    errors.extend(f"section {n} missing" for n in names if n not in found)
    return {n: "\n".join(body).strip() for n, body in found.items()}, truncated


def load_json(body: str, name: str, errors: list[str]) -> Any:
    """Parse the first JSON value in ``body``; on failure salvage every complete ``{...}`` object."""
    body = _FENCE.sub("", body).strip()
    start = min((i for i in (body.find("["), body.find("{")) if i >= 0), default=-1)
    if start < 0:
        if body and body.casefold() not in _NONE:
            errors.append(f"{name}: no JSON found")
        return None
    decoder = json.JSONDecoder()
    try:
        return decoder.raw_decode(body, start)[0]
    except ValueError as exc:
        salvaged = []
        pos = body.find("{", start + 1 if body[start] == "{" else start)
        while pos >= 0:
            try:
                obj, end = decoder.raw_decode(body, pos)
            except ValueError:
                pos = body.find("{", pos + 1)
                continue
            salvaged.append(obj)
            pos = body.find("{", end)
        errors.append(f"{name}: invalid JSON ({exc.msg} at char {exc.pos}); salvaged {len(salvaged)} object(s)")
        return salvaged


def _text(value: Any, limit: int) -> str | None:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    text = " ".join(str(value).split())
    return text if 0 < len(text) <= limit else None


def _when(value: Any, key: str, errors: list[str], i: int) -> str | None:
    if value in (None, "", "null"):
        return None
    try:
        return to_db(value)
    except (ValueError, TypeError, OverflowError, OSError):
        errors.append(f"FACTS[{i}]: {key} {str(value)[:40]!r} is not a date; ignored")
        return None


def _fact(raw: Any, i: int, errors: list[str]) -> FactTriple | None:
    if isinstance(raw, list | tuple) and len(raw) == 3:
        raw = dict(zip(("subject", "predicate", "object"), raw, strict=True))
    if not isinstance(raw, dict):
        errors.append(f"FACTS[{i}]: not an object")
        return None
    subject, obj = _text(raw.get("subject"), MAX_ENTITY_CHARS), _text(raw.get("object"), MAX_ENTITY_CHARS)
    pred_raw = _text(raw.get("predicate"), 64)
    predicate = normalize_predicate(pred_raw) if pred_raw else ""
    if not (subject and obj and predicate):
        errors.append(f"FACTS[{i}]: needs subject, predicate and object strings (entities <= {MAX_ENTITY_CHARS})")
        return None
    conf = raw.get("confidence", 1.0)
    conf = min(1.0, max(0.0, float(conf))) if isinstance(conf, int | float) and not isinstance(conf, bool) else 1.0
    vf = _when(raw.get("valid_from"), "valid_from", errors, i)
    vu = _when(raw.get("valid_until"), "valid_until", errors, i)
    if vf and vu and vu <= vf:
        errors.append(f"FACTS[{i}]: valid_until not after valid_from; valid_until ignored")
        vu = None
    return FactTriple(subject=subject, predicate=predicate, object=obj, valid_from=vf, valid_until=vu, confidence=conf)


def _memories(body: str, errors: list[str]) -> list[str]:
    out: list[str] = []
    for line in body.split("\n"):
        text = " ".join(_BULLET.sub("", line, count=1).split())
        if not text or text.casefold() in _NONE or text.startswith("```"):
            continue
        if len(text) > MAX_LINE_CHARS:
            errors.append(f"MEMORIES: a line of {len(text)} characters was cut to {MAX_LINE_CHARS}")
            text = text[:MAX_LINE_CHARS].rstrip() + "…"
        if len(out) == MAX_MEMORIES:
            errors.append(f"MEMORIES: more than {MAX_MEMORIES} lines; the rest dropped")
            break
        if text not in out:
            out.append(text)
    return out


_PAIR = re.compile(r'"([^"\n]{1,80})"\s*:\s*(-?\d+(?:\.\d+)?)')


def _topics(body: str, errors: list[str]) -> dict[str, float]:
    data = load_json(body, "TOPICS", errors)
    if data == [] and "{" in body:  # a cut-off map has no inner objects to salvage: take its pairs
        data = {k: float(v) for k, v in _PAIR.findall(body)}
    return _topic_map(data, errors)


def _topic_map(data: Any, errors: list[str]) -> dict[str, float]:
    if isinstance(data, list):  # a bare list of names, salvaged fragments of a map, or {topic, weight}s
        merged: dict[str, Any] = {}
        for item in data:
            if isinstance(item, dict) and set(item) >= {"topic", "weight"}:
                merged[str(item["topic"])] = item["weight"]
            elif isinstance(item, dict):
                merged.update(item)
            elif _text(item, 80):
                merged[str(item)] = 1.0
        data = merged
    if not isinstance(data, dict):
        if data is not None:
            errors.append("TOPICS: expected a JSON object of topic -> weight")
        return {}
    out: dict[str, float] = {}
    for key, weight in data.items():
        name = _text(key, 80)
        if name is None or isinstance(weight, bool) or not isinstance(weight, int | float):
            errors.append(f"TOPICS: entry {str(key)[:40]!r} ignored")
            continue
        if len(out) < MAX_TOPICS:
            out[name.casefold()] = float(weight)
    return out


def json_answer(text: Any, keys: tuple[str, ...]) -> dict[str, Any] | None:
    """A structured-output answer (``schemas``): a whole JSON object holding one of ``keys``, in a
    code fence or not. None for anything else, which the labelled-sections parser then reads."""
    if not isinstance(text, str) or len(text) > MAX_INPUT_CHARS:
        return None
    body = _FENCE.sub("", text).strip()
    if not body.startswith("{"):
        return None
    try:
        data, end = json.JSONDecoder().raw_decode(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not any(k in data for k in keys) or body[end:].strip():
        return None
    return data


def _extraction_json(data: dict[str, Any]) -> Extraction:
    errors: list[str] = []
    raw = data.get("memories")
    items = [x for x in raw if isinstance(x, str)] if isinstance(raw, list) else []
    if isinstance(raw, list) and len(items) != len(raw):
        errors.append("memories: entries that are not text dropped")
    return _extraction(_memories("\n".join(items), errors), data.get("facts"), _topic_map(data.get("topics"), errors),
                       errors, truncated=False)  # fmt: skip


def _extraction(memories: list[str], data: Any, topics: dict[str, float], errors: list[str], *,
                truncated: bool) -> Extraction:  # fmt: skip
    if isinstance(data, dict):
        data = data.get("facts", [data])
    if data is not None and not isinstance(data, list):
        errors.append("FACTS: expected a JSON list")
        data = None
    facts: list[FactTriple] = []
    for i, raw in enumerate(data or []):
        if len(facts) == MAX_FACTS:
            errors.append(f"FACTS: more than {MAX_FACTS}; the rest dropped")
            break
        fact = _fact(raw, i, errors)
        if fact is not None and fact not in facts:
            facts.append(fact)
    return Extraction(
        memories=tuple(memories), facts=tuple(facts), topics=topics, errors=tuple(errors), truncated=truncated
    )


def parse_extraction(text: Any) -> Extraction:
    """Nightly extraction output (structured JSON or labelled sections) -> typed result. Never raises."""
    structured = json_answer(text, ("memories", "facts"))
    if structured is not None:
        return _extraction_json(structured)
    errors: list[str] = []
    sections, truncated = split_sections(text, ("MEMORIES", "FACTS", "TOPICS"), errors)
    memories = _memories(sections.get("MEMORIES", ""), errors)
    data = load_json(sections["FACTS"], "FACTS", errors) if "FACTS" in sections else None
    topics = _topics(sections["TOPICS"], errors) if "TOPICS" in sections else {}
    return _extraction(memories, data, topics, errors, truncated=truncated)


def _slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")[:100]


def _files(data: Any, name: str, errors: list[str], *, people: bool) -> list[FileUpdate]:
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        if data is not None:
            errors.append(f"{name}: expected a JSON list")
        return []
    out: list[FileUpdate] = []
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            errors.append(f"{name}[{i}]: not an object")
            continue
        title = _text(raw.get("name" if people else "title"), 200) or ""
        slug = raw.get("slug")
        if not people and not (isinstance(slug, str) and _SLUG.match(slug)):
            slug = _slugify(title)  # a topic can be named by its title; a person needs their id
        content = raw.get("content")
        ops = raw.get("ops")
        if isinstance(ops, dict):
            ops = [ops]
        has_ops = isinstance(ops, list)
        has_content = isinstance(content, str) and bool(content.strip())
        if not isinstance(slug, str) or not _SLUG.match(slug) or not (has_ops or has_content):
            errors.append(f"{name}[{i}]: needs a safe slug ([A-Za-z0-9_-]) and a list of ops (or non-empty content)")
            continue
        content = content if has_content and isinstance(content, str) else ""
        if len(content) > MAX_FILE_CHARS:
            errors.append(f"{name}[{i}]: content cut to {MAX_FILE_CHARS} characters")
            content = content[:MAX_FILE_CHARS]
        aliases = raw.get("aliases") if people else None
        cleaned = (_text(x, 80) for x in aliases if isinstance(x, str)) if isinstance(aliases, list) else ()
        names = tuple(dict.fromkeys(a for a in cleaned if a))
        if len(out) == MAX_FILES:
            errors.append(f"{name}[{i}]: more than {MAX_FILES} files in one answer; dropped")
        else:
            out.append(FileUpdate(slug=slug, title=title, content=content.strip() + "\n" if content else "",
                                  aliases=names, ops=tuple(ops) if isinstance(ops, list) else None))
    return out


def parse_writer_output(text: Any) -> WriterOutput:
    """Memory-writer output (structured JSON or labelled sections) -> typed result. Never raises."""
    structured = json_answer(text, ("summary",))
    if structured is not None:
        errors: list[str] = []
        summary = structured.get("summary")
        summary = summary.strip() if isinstance(summary, str) else ""
        if len(summary) > MAX_FILE_CHARS:
            errors.append(f"summary: cut to {MAX_FILE_CHARS} characters")
            summary = summary[:MAX_FILE_CHARS]
        people = _files(structured.get("people"), "PEOPLE", errors, people=True)
        topics = _files(structured.get("topics"), "TOPICS", errors, people=False)
        return WriterOutput(summary=summary, people=tuple(people), topics=tuple(topics), errors=tuple(errors))
    errors = []
    sections, truncated = split_sections(text, ("SUMMARY", "PEOPLE", "TOPICS"), errors)
    summary = sections.get("SUMMARY", "")
    if len(summary) > MAX_FILE_CHARS:
        errors.append(f"SUMMARY: cut to {MAX_FILE_CHARS} characters")
        summary = summary[:MAX_FILE_CHARS]
    people_json = load_json(sections["PEOPLE"], "PEOPLE", errors) if "PEOPLE" in sections else None
    topics_json = load_json(sections["TOPICS"], "TOPICS", errors) if "TOPICS" in sections else None
    people = _files(people_json, "PEOPLE", errors, people=True)
    topics = _files(topics_json, "TOPICS", errors, people=False)
    return WriterOutput(
        summary=summary, people=tuple(people), topics=tuple(topics), errors=tuple(errors), truncated=truncated
    )
