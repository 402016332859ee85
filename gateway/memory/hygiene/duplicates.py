"""Duplicate people files, found without a model, and the link-aware merge that fixes them.

Seed 001: "the housekeeping pass notices two files that claim to be about the same person but aren't
linked to each other, and flags them for merging". Two ``people/*.md`` files are about the same
person when one's names (its ``# title`` and its ``## Aliases``, plus the names ``_aliases.json``
maps to it) meet the other's; files that link to each other were kept apart on purpose (the same
person on two platforms, linked by hand) and are left alone.

The merge keeps the file more of the tree links to (then the longer one): the other file's text is
appended under ``## Merged from <path>`` with its links re-pointed from its own folder, the other
file is deleted, every link in the tree that named it is rewritten to the kept file (fragments kept),
and ``people/_aliases.json`` entries that named it name the kept file's slug.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.memory.files import links
from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.store import MemoryStore
from gateway.memory.hygiene.proposals import Change, Proposal, new_id

PEOPLE = "people"
ALIASES = "people/_aliases.json"
MAX_FILES = 2000  # files scanned for links per run: a tree larger than this is not rewritten blind
_WORD = re.compile(r"\w+")
_ALIASES_HEADING = re.compile(r"^##\s+aliases\s*:?\s*$", re.IGNORECASE)
_LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")


@dataclass(frozen=True, slots=True)
class PersonFile:
    path: str
    text: str
    names: frozenset[str]


def fold(name: str) -> str:
    return " ".join(_WORD.findall(name.casefold()))


def names_in(text: str) -> set[str]:
    """The ``# title`` and the ``## Aliases`` names of a people file, folded."""
    out: set[str] = set()
    inside = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# ") and not out:
            out.add(fold(stripped[2:]))
            continue
        if stripped.startswith("#"):
            inside = bool(_ALIASES_HEADING.match(stripped))
            continue
        if inside and stripped:
            out.update(fold(p) for p in _LIST_MARK.sub("", stripped).split(","))
    return {n for n in out if n}


def _alias_map(store: MemoryStore) -> dict[str, str]:
    try:
        data = json.loads(store.read(ALIASES)) if store.exists(ALIASES) else {}
    except (ValueError, MemoryStoreError):
        return {}
    return {fold(str(k)): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def people_files(store: MemoryStore) -> list[PersonFile]:
    aliases = _alias_map(store)
    out = []
    for entry in store.files(PEOPLE):
        if entry.path.count("/") != 1 or not entry.path.endswith(".md"):
            continue
        try:
            text = store.read(entry.path)
        except MemoryStoreError:
            continue
        slug = entry.path[len(PEOPLE) + 1:-3]
        names = names_in(text) | {n for n, s in aliases.items() if s == slug and n}
        out.append(PersonFile(entry.path, text, frozenset(names)))
    return out


def _links_between(a: PersonFile, b: PersonFile) -> bool:
    return any(r.path == b.path for r in links.resolved(a.path, a.text)) or \
        any(r.path == a.path for r in links.resolved(b.path, b.text))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tree_texts(store: MemoryStore) -> dict[str, str]:
    """Every Markdown file of the root (for link rewriting), by path."""
    out = {}
    for entry in store.files()[:MAX_FILES]:
        if entry.path.endswith(".md"):
            try:
                out[entry.path] = store.read(entry.path)
            except MemoryStoreError:
                continue
    return out


def _inbound(texts: dict[str, str], path: str) -> int:
    return sum(1 for src, text in texts.items() if src != path
               for r in links.resolved(src, text) if r.path == path)  # fmt: skip


def merge(store: MemoryStore, keep: PersonFile, gone: PersonFile, texts: dict[str, str]) -> list[Change]:
    """The changes that merge ``gone`` into ``keep`` and re-point every link and alias."""
    # The text moves to another file: its links keep their destinations, written from the new place.
    body = _relink(gone.path, keep.path, gone.text).strip()
    head, sep, rest = body.partition("\n")
    if sep and head.startswith("# "):
        body = rest.strip()
    merged_keep = keep.text.rstrip("\n") + f"\n\n## Merged from {gone.path}\n\n{body}\n"
    changes = []
    new_texts = {keep.path: merged_keep}
    for src, text in texts.items():
        if src in (keep.path, gone.path):
            continue
        rewritten = links.rewrite(src, text, lambda p: keep.path if p == gone.path else None)
        if rewritten != text:
            new_texts[src] = rewritten
    # The kept file's own links to the merged one would now point at itself: drop them to plain text.
    new_texts[keep.path] = links.rewrite(keep.path, new_texts[keep.path],
                                         lambda p: keep.path if p == gone.path else None)
    for src, text in sorted(new_texts.items()):
        before = texts.get(src, keep.text if src == keep.path else "")
        changes.append(Change(path=src, before_sha256=_sha(before), after=text))
    aliases_change = _aliases_change(store, keep.path, gone.path)
    if aliases_change is not None:
        changes.append(aliases_change)
    changes.append(Change(path=gone.path, before_sha256=_sha(gone.text), after=None))
    return changes


def _relink(source: str, target: str, text: str) -> str:
    """A text moving from file ``source`` to file ``target``: its links keep their destinations."""
    pieces, last = [], 0
    for link in links.links(text):
        path, why = links.resolve(source, link.target)
        if not path or why:
            continue
        fragment = link.target[link.target.index("#"):] if "#" in link.target else ""
        pieces += [text[last:link.start], links.relative(target, path) + fragment]
        last = link.end
    return "".join(pieces) + text[last:]


def _aliases_change(store: MemoryStore, keep: str, gone: str) -> Change | None:
    if not store.exists(ALIASES):
        return None
    try:
        raw = store.read(ALIASES)
        data = json.loads(raw)
    except (ValueError, MemoryStoreError):
        return None
    if not isinstance(data, dict):
        return None
    slug_keep, slug_gone = keep[len(PEOPLE) + 1:-3], gone[len(PEOPLE) + 1:-3]
    if slug_gone not in data.values():
        return None
    updated = {k: (slug_keep if v == slug_gone else v) for k, v in data.items()}
    return Change(path=ALIASES, before_sha256=_sha(raw),
                  after=json.dumps(updated, ensure_ascii=False, indent=1, sort_keys=True) + "\n")


def _pairs(files: list[PersonFile]) -> Iterable[tuple[PersonFile, PersonFile, set[str]]]:
    by_name: dict[str, list[PersonFile]] = {}
    for f in files:
        for n in f.names:
            by_name.setdefault(n, []).append(f)
    seen: set[tuple[str, str]] = set()
    for group in by_name.values():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                key = (min(a.path, b.path), max(a.path, b.path))
                if key in seen or a.path == b.path:
                    continue
                seen.add(key)
                yield a, b, set(a.names & b.names)


def proposals(store: MemoryStore) -> list[Proposal]:
    """One merge proposal per pair of people files about the same person that do not link each other."""
    files = people_files(store)
    if len(files) < 2:
        return []
    texts: dict[str, str] | None = None
    out = []
    merged: set[str] = set()
    for a, b, shared in _pairs(files):
        if a.path in merged or b.path in merged or _links_between(a, b):
            continue
        texts = texts if texts is not None else tree_texts(store)
        keep, gone = sorted((a, b), key=lambda f: (-_inbound(texts, f.path), -len(f.text), f.path))
        changes = merge(store, keep, gone, texts)
        merged.update((a.path, b.path))
        others = [c.path for c in changes if c.path not in (keep.path, gone.path)]
        called = ", ".join(f"\u201c{n}\u201d" for n in sorted(shared))
        detail = (f"Both files name the same person ({called}) and do not link each other. {gone.path} goes into "
                  f"{keep.path}"
                  + (f"; links in {', '.join(others)} are re-pointed." if others else "."))
        out.append(Proposal(id=new_id(), kind="merge", title=f"Merge {gone.path} into {keep.path}", detail=detail,
                            changes=changes, fingerprint=f"merge:{keep.path}|{gone.path}"))
    return out
