"""Lorebooks as plain files: one Markdown file per entry under ``lore/<book>/``, and how entries trigger.

Two formats come in and go out: the Character Card lorebook (``character_book`` of a V2/V3 card, or
``{"spec": "lorebook_v3", "data": ...}`` alone) and SillyTavern's World Info JSON (``{"entries": {"0":
{"key": [...], "keysecondary": [...], "order": 100, "disable": false, ...}}}``). Each entry file keeps
the entry exactly as imported (every field, unknown extensions included) in a one-line marker, and its
``content`` as the file's body, so exporting to the format it came from gives back the same entry with
the body as it is now; exporting to the other format converts the fields SillyTavern itself maps.

```
# Dragons

- keys: dragon, wyrm · constant: no · order: 100 · position: before_char
<!-- kith:lore {"v":1,"format":"character_book","entry":{...every field but content...}} -->

Dragons sleep on gold.
```

The heading and the summary line are for people and regenerated on export; the marker is what the
runtime and the exporter read. A file without a marker (written by hand) is background with no keys:
recall may still find it by meaning, it never triggers by keyword.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

MARKER = "<!-- kith:lore "
MARKER_END = " -->"
BOOK_FILE = "_book.json"
CHARACTER_BOOK = "character_book"
WORLD_INFO = "st-world-info"
FORMATS = (CHARACTER_BOOK, WORLD_INFO)


class LoreError(ValueError):
    """A lorebook that cannot be imported (wrong shape, too many entries, a field too large)."""


# ------------------------------------------------------------------------------- the entry file


def slug(text: str, limit: int = 40, *, default: str = "entry") -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].strip("-") or default


def _marker_json(obj: dict[str, Any]) -> str:
    # ">" never occurs outside a JSON string, so escaping it keeps "-->" out of the comment.
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).replace(">", "\\u003e")


def render_entry(fmt: str, entry: dict[str, Any]) -> str:
    rule = rule_of(fmt, entry)
    meta = {k: v for k, v in entry.items() if k != "content"}
    title = rule.title.replace("\n", " ").strip() or "Lore entry"
    summary = " · ".join([
        f"keys: {', '.join(rule.keys) or '(none)'}",
        *([f"secondary keys: {', '.join(rule.secondary_keys)}"] if rule.secondary_keys else []),
        f"constant: {'yes' if rule.constant else 'no'}",
        *([] if rule.enabled else ["disabled"]),
        f"order: {rule.insertion_order}",
        f"position: {rule.position}",
        *([f"probability: {rule.probability:g}%"] if rule.probability < 100 else []),
    ]).replace("\n", " ")
    marker = MARKER + _marker_json({"v": 1, "format": fmt, "entry": meta}) + MARKER_END
    return f"# {title}\n\n- {summary}\n{marker}\n\n{rule.content}"


def parse_entry(text: str) -> tuple[str, dict[str, Any]] | None:
    """(format, entry with its current body as ``content``), or None for a file with no marker."""
    start = text.find("\n" + MARKER)
    if start < 0:
        start = 0 if text.startswith(MARKER) else -1
    else:
        start += 1
    if start < 0:
        return None
    end = text.find(MARKER_END + "\n", start)
    if end < 0:
        end = text.find(MARKER_END, start)
        if end < 0:
            return None
    try:
        meta = json.loads(text[start + len(MARKER):end])
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("format") not in FORMATS or not isinstance(meta.get("entry"), dict):
        return None
    rest = text[end + len(MARKER_END):]
    rest = rest[1:] if rest.startswith("\n") else rest
    content = rest[1:] if rest.startswith("\n") else rest
    fmt = str(meta["format"])
    return fmt, {**meta["entry"], "content": content}


# ------------------------------------------------------------------------ what triggers an entry


@dataclass(frozen=True, slots=True)
class LoreRule:
    """An entry as the runtime reads it, whatever format it came in."""

    title: str
    content: str
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    constant: bool = False
    enabled: bool = True
    selective: bool = False
    selective_logic: int = 0  # SillyTavern: 0 AND ANY, 1 NOT ALL, 2 NOT ANY, 3 AND ALL
    insertion_order: float = 100
    priority: float | None = None
    position: str = "before_char"
    probability: float = 100
    case_sensitive: bool = False
    use_regex: bool = False
    uid: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _strs(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        return tuple(k.strip() for k in v.split(",") if k.strip())
    if not isinstance(v, list):
        return ()
    return tuple(str(k) for k in v if isinstance(k, str | int | float) and str(k).strip())


def _num(v: Any, default: float) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else default


def rule_of(fmt: str, e: dict[str, Any]) -> LoreRule:
    content = e.get("content") if isinstance(e.get("content"), str) else ""
    ext = e.get("extensions") if isinstance(e.get("extensions"), dict) else {}
    if fmt == WORLD_INFO:
        keys, secondary = _strs(e.get("key")), _strs(e.get("keysecondary"))
        title = str(e.get("comment") or (keys[0] if keys else "") or content[:40])
        use_probability = e.get("useProbability", True) is not False
        return LoreRule(
            title=title, content=str(content), keys=keys, secondary_keys=secondary,
            constant=e.get("constant") is True, enabled=e.get("disable") is not True,
            selective=e.get("selective") is True, selective_logic=int(_num(e.get("selectiveLogic"), 0)),
            insertion_order=_num(e.get("order"), 100),
            position="before_char" if _num(e.get("position"), 0) == 0 else "after_char",
            probability=_num(e.get("probability"), 100) if use_probability else 100,
            case_sensitive=e.get("caseSensitive") is True, uid=str(e.get("uid", "")),
        )
    keys, secondary = _strs(e.get("keys")), _strs(e.get("secondary_keys"))
    title = str(e.get("name") or e.get("comment") or (keys[0] if keys else "") or content[:40])
    use_probability = ext.get("useProbability", True) is not False
    return LoreRule(
        title=title, content=str(content), keys=keys, secondary_keys=secondary,
        constant=e.get("constant") is True, enabled=e.get("enabled", True) is not False,
        selective=e.get("selective") is True, selective_logic=int(_num(ext.get("selectiveLogic"), 0)),
        insertion_order=_num(e.get("insertion_order"), 100),
        priority=_num(e.get("priority"), 0) if "priority" in e else None,
        position=str(e.get("position") or "before_char"),
        probability=_num(ext.get("probability"), 100) if use_probability else 100,
        case_sensitive=e.get("case_sensitive") is True, use_regex=e.get("use_regex") is True,
        uid=str(e.get("id", "")),
    )


def _found(key: str, text: str, folded: str, case_sensitive: bool) -> bool:
    return key in text if case_sensitive else key.casefold() in folded


def triggered(rule: LoreRule, text: str, *, seed: str = "") -> bool:
    """Whether ``rule`` enters the prompt for the recent messages ``text``.

    Constant entries always do; disabled ones never. Otherwise one of ``keys`` must appear (case-
    insensitive unless the entry says otherwise), and a selective entry's ``secondary_keys`` must
    pass SillyTavern's logic. Regex keys are not evaluated (Python's ``re`` has no time limit and a
    card is someone else's text); such entries still reach the model through recall. ``probability``
    is rolled with ``seed`` (the turn id), so a turn's prompt is reproducible."""
    if not rule.enabled:
        return False
    if not rule.constant:
        if rule.use_regex or not rule.keys:
            return False
        folded = text.casefold()
        if not any(_found(k, text, folded, rule.case_sensitive) for k in rule.keys):
            return False
        if rule.selective and rule.secondary_keys:
            hits = [_found(k, text, folded, rule.case_sensitive) for k in rule.secondary_keys]
            ok = {0: any(hits), 1: not all(hits), 2: not any(hits), 3: all(hits)}.get(rule.selective_logic, any(hits))
            if not ok:
                return False
    if rule.probability < 100:
        return random.Random(f"{seed}:{rule.uid}:{rule.title}").random() * 100 < rule.probability
    return True


# ----------------------------------------------------------------------------- format conversion


def to_world_info(fmt: str, e: dict[str, Any], uid: int) -> dict[str, Any]:
    """An entry as a SillyTavern World Info entry (as SillyTavern converts a character book)."""
    if fmt == WORLD_INFO:
        return dict(e)
    ext = dict(e.get("extensions") or {}) if isinstance(e.get("extensions"), dict) else {}
    rule = rule_of(fmt, e)
    out: dict[str, Any] = {
        "uid": uid, "key": list(rule.keys), "keysecondary": list(rule.secondary_keys),
        "comment": e.get("comment", e.get("name", "")), "content": rule.content, "constant": rule.constant,
        "selective": rule.selective, "selectiveLogic": rule.selective_logic, "order": rule.insertion_order,
        "position": 0 if rule.position == "before_char" else 1, "disable": not rule.enabled,
        "probability": ext.get("probability", 100), "useProbability": ext.get("useProbability", True),
        "caseSensitive": e.get("case_sensitive"),
    }
    for k, v in ext.items():
        out.setdefault(k, v)
    return out


def to_character_book(fmt: str, e: dict[str, Any], uid: int) -> dict[str, Any]:
    """An entry as a Character Card lorebook entry."""
    if fmt == CHARACTER_BOOK:
        return dict(e)
    rule = rule_of(fmt, e)
    known = {"uid", "key", "keysecondary", "comment", "content", "constant", "selective", "order", "position",
             "disable", "caseSensitive"}
    return {
        "id": e.get("uid", uid), "keys": list(rule.keys), "secondary_keys": list(rule.secondary_keys),
        "comment": e.get("comment", ""), "content": rule.content, "constant": rule.constant,
        "selective": rule.selective, "insertion_order": rule.insertion_order, "enabled": rule.enabled,
        "position": rule.position, "use_regex": False, "case_sensitive": e.get("caseSensitive"),
        "extensions": {k: v for k, v in e.items() if k not in known},
    }


def book_entries(fmt: str, book: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of a lorebook object, in their stored order."""
    entries = book.get("entries")
    if fmt == WORLD_INFO:
        if isinstance(entries, dict):
            return [v for _, v in entries.items() if isinstance(v, dict)]
        if isinstance(entries, list):
            return [v for v in entries if isinstance(v, dict)]
        raise LoreError("a SillyTavern World Info file needs an 'entries' object")
    if not isinstance(entries, list):
        raise LoreError("a lorebook needs an 'entries' list")
    if not all(isinstance(v, dict) for v in entries):
        raise LoreError("every lorebook entry must be an object")
    return list(entries)


def detect(obj: Any) -> tuple[str, dict[str, Any], bool]:
    """(format, lorebook object, wrapped in {"spec": "lorebook_v3"}) of a parsed lorebook file."""
    if not isinstance(obj, dict):
        raise LoreError("a lorebook file must hold a JSON object")
    if "spec" in obj:
        if obj.get("spec") != "lorebook_v3" or not isinstance(obj.get("data"), dict):
            raise LoreError(f"unsupported lorebook spec {obj.get('spec')!r} (kith reads 'lorebook_v3', Character "
                            "Card lorebooks and SillyTavern World Info)")  # fmt: skip
        return CHARACTER_BOOK, obj["data"], True
    if isinstance(obj.get("entries"), dict):
        return WORLD_INFO, obj, False
    if isinstance(obj.get("entries"), list):
        first = next((e for e in obj["entries"] if isinstance(e, dict)), {})
        return (WORLD_INFO if "key" in first and "keys" not in first else CHARACTER_BOOK), obj, False
    raise LoreError("not a lorebook: no 'entries' (want a Character Card lorebook, {'spec': 'lorebook_v3'} or "
                    "SillyTavern World Info)")  # fmt: skip
