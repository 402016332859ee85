"""Playbooks (seed 004): how this person wants a thing done, one Markdown file each under ``playbooks/``.

A playbook is an actionable procedure ("how I like my trip bookings done"), written by hand in the
person's tree. Unlike a profile line it matters only when the conversation is about its subject, so
it is recalled by relevance: a file enters when the message shares words with its title or body,
best match first. Scoring is by shared words, not by the vector index, so a playbook is found the
same way whether or not the embedder loaded, and its title (the H1) counts double: it names what the
procedure is for. In the prompt it is the most protected trimmable section (``TRIM_PLAYBOOKS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.memory.files.errors import MemoryStoreError
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore

DIR = "playbooks"
# The playbook files a turn's prompt holds (set by the playbook stage, which runs before recall, being
# registered after it): the recall stage drops its hits from them.
INJECTED: StashKey[frozenset[str]] = StashKey()
MAX_FILES = 200  # a person's playbooks are read per turn: past this many, the rest are not considered
MAX_FILE_CHARS = 8000
_WORD = re.compile(r"[^\W_]+")
# Words too common to make a playbook relevant on their own.
_STOP_WORDS = (
    "about after again also always before could does doing done from have here into just like make more "
    "most much need only other over please should some such than that their them then there these they "
    "this those through want what when where which while will with would your"
)
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True, slots=True)
class Playbook:
    path: str
    title: str
    body: str
    score: float


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if len(w) >= 4 and w not in _STOP}


def _stem(word: str) -> str:
    """A crude English stem, so "booking" meets "bookings" and "booked"."""
    for suffix in ("ings", "ing", "ies", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def parse(path: str, text: str) -> tuple[str, str]:
    """(title, body): the H1 when the file starts with one, else the file name."""
    head, _, rest = text.strip().partition("\n")
    if head.startswith("# "):
        return head[2:].strip(), rest.strip()
    return path.rsplit("/", 1)[-1].removesuffix(".md").replace("-", " "), text.strip()


def score(query: set[str], title: str, body: str) -> float:
    q = {_stem(w) for w in query}
    in_title = q & {_stem(w) for w in words(title)}
    in_body = q & {_stem(w) for w in words(body)}
    return 2.0 * len(in_title) + len(in_body - in_title)


def relevant(store: MemoryStore, message: str, *, limit: int = 3) -> list[Playbook]:
    """The playbooks sharing words with ``message``, best first (ties: by path), at most ``limit``."""
    query = words(message)
    if not query or limit <= 0:
        return []
    try:
        entries = store.files(DIR)  # [] when the folder does not exist
    except MemoryStoreError:
        return []
    found: list[Playbook] = []
    for entry in sorted(entries, key=lambda e: e.path)[:MAX_FILES]:
        if not entry.path.endswith(".md"):
            continue
        try:
            text = store.read(entry.path)[:MAX_FILE_CHARS]
        except MemoryStoreError:
            continue  # changed under us: the next turn reads it
        title, body = parse(entry.path, text)
        s = score(query, title, body)
        if s > 0:
            found.append(Playbook(entry.path, title, body, s))
    found.sort(key=lambda p: (-p.score, p.path))
    return found[:limit]


def section_text(playbooks: list[Playbook]) -> str:
    parts = [f"## {p.title} ({p.path})\n{p.body}" for p in playbooks]
    return "How this person wants these things done (their playbooks):\n\n" + "\n\n".join(parts)
