"""Which lore entries of a persona enter this turn's prompt: keyword triggers, constants, a token budget.

Books are the folders of ``lore/`` (``lore/card/`` from a card, ``lore/<name>/`` from a lorebook
import); a file directly in ``lore/`` belongs to a book of its own. Each turn scans the recent
messages (the book's ``scan_depth`` messages, default 4: this one and the three before it) for each
entry's keys (``gateway.personas.lore.triggered``). Triggered entries are kept by importance (constants
first, then the entry's ``priority``, else its ``insertion_order``, higher first) while they fit the
budget (the book's ``token_budget`` and the section's), and rendered in insertion order, ``before_char``
entries before ``after_char`` ones. Files are read through the guarded store and re-read only when
they change (``FileCache``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.store import MemoryStore
from gateway.personas import FileCache
from gateway.personas.lore import BOOK_FILE, LoreRule, parse_entry, rule_of, triggered
from gateway.turn.budget import estimate_tokens

LORE_DIR = "lore"
DEFAULT_SCAN_DEPTH = 4
MAX_ENTRY_FILES = 5000  # a persona with more lore files than this is read up to here (logged by the caller)


@dataclass(frozen=True, slots=True)
class Entry:
    book: str
    path: str  # relative to the persona root
    rule: LoreRule


@dataclass(frozen=True, slots=True)
class Book:
    name: str
    scan_depth: int
    token_budget: int | None
    entries: tuple[Entry, ...]


def _book_meta(store: MemoryStore, files: FileCache, book: str) -> tuple[int, int | None]:
    text, _ = files.read(store, f"{LORE_DIR}/{book}/{BOOK_FILE}")
    meta = {}
    if text:
        try:
            loaded = json.loads(text)
            meta = loaded.get("book") or {} if isinstance(loaded, dict) else {}
        except ValueError:
            meta = {}
    depth = meta.get("scan_depth") if isinstance(meta, dict) else None
    budget = meta.get("token_budget") if isinstance(meta, dict) else None
    ok_depth = isinstance(depth, int) and not isinstance(depth, bool) and depth > 0
    ok_budget = isinstance(budget, int) and not isinstance(budget, bool) and budget > 0
    return (depth if ok_depth else DEFAULT_SCAN_DEPTH), (budget if ok_budget else None)  # type: ignore[return-value]


def load_books(store: MemoryStore, files: FileCache) -> list[Book]:
    """Every book of the persona whose root is ``store`` (none when it has no ``lore/``)."""
    try:
        # Most personas have no lore: one stat answers that, where a walk opens the root and the
        # directory (this runs every turn).
        if not store.stat(LORE_DIR).is_dir:
            return []
        listed = store.files(LORE_DIR)
    except MemoryStoreError:
        return []
    by_book: dict[str, list[Entry]] = {}
    for entry in sorted(listed, key=lambda e: e.path)[:MAX_ENTRY_FILES]:
        if entry.is_dir or not entry.path.endswith(".md"):
            continue
        parts = entry.path.split("/")
        book = parts[1] if len(parts) > 2 else ""
        text, _ = files.read(store, entry.path, seen=entry)
        parsed = parse_entry(text)
        # A file without a marker has no keys: it never triggers, only recall finds it (plugins/lore.py).
        rule = rule_of(*parsed) if parsed else LoreRule(title=parts[-1][:-3], content=text.strip())
        by_book.setdefault(book, []).append(Entry(book=book, path=entry.path, rule=rule))
    books = []
    for name, entries in sorted(by_book.items()):
        depth, budget = _book_meta(store, files, name) if name else (DEFAULT_SCAN_DEPTH, None)
        books.append(Book(name=name, scan_depth=depth, token_budget=budget, entries=tuple(entries)))
    return books


def _cost(entry: Entry) -> int:
    return estimate_tokens(entry.rule.content) + 2


def select(books: Sequence[Book], recent: Sequence[str], *, seed: str, budget_tokens: int) -> list[Entry]:
    """The entries for this turn; ``recent``: the messages, newest first (this turn's first)."""
    chosen: list[Entry] = []
    for book in books:
        text = "\n".join(recent[:book.scan_depth])
        hits = [e for e in book.entries if triggered(e.rule, text, seed=seed)]
        hits.sort(key=lambda e: (not e.rule.constant, -(e.rule.priority if e.rule.priority is not None
                                                         else e.rule.insertion_order)))  # fmt: skip
        used = 0
        for e in hits:
            if book.token_budget is not None and used + _cost(e) > book.token_budget:
                continue
            used += _cost(e)
            chosen.append(e)
    chosen.sort(key=lambda e: (not e.rule.constant, -(e.rule.priority if e.rule.priority is not None
                                                      else e.rule.insertion_order)))  # fmt: skip
    kept: list[Entry] = []
    used = 0
    for e in chosen:
        if used + _cost(e) > budget_tokens:
            continue
        used += _cost(e)
        kept.append(e)
    kept.sort(key=lambda e: (e.rule.position != "before_char", e.rule.insertion_order, e.path))
    return kept
