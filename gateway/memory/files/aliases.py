"""The ``## Aliases`` section of a people file (seed 001): the names a person is known by, in the file.

The memory writer appends every new name it sees there (as well as to ``people/_aliases.json``), and
the people lookup reads the section back, so a name a human adds by hand works like one the writer
found. One parser for both sides.
"""

from __future__ import annotations

import re

SECTION = "Aliases"
_ALIASES_HEADING = re.compile(r"^##\s+aliases\s*:?\s*$", re.IGNORECASE)
_LIST_MARK = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
MAX_ALIAS = 100


def section_aliases(text: str) -> list[str]:
    """The names of a file's ``## Aliases`` section(s), as written."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            inside = bool(_ALIASES_HEADING.match(stripped))
            continue
        if inside and stripped:
            out += [p.strip() for p in _LIST_MARK.sub("", stripped).split(",") if p.strip()]
    return [a for a in out if len(a) <= MAX_ALIAS]


def new_names(text: str, names: list[str]) -> list[str]:
    """``names`` the file's ``## Aliases`` section does not list yet (compared case- and space-blind),
    each once, in order."""
    seen = {" ".join(a.split()).casefold() for a in section_aliases(text)}
    out: list[str] = []
    for name in names:
        clean = " ".join(name.split())
        key = clean.casefold()
        if clean and len(clean) <= MAX_ALIAS and "," not in clean and key not in seen:
            seen.add(key)
            out.append(clean)
    return out
