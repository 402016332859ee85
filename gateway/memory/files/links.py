"""Markdown links between memory files: finding them, and resolving them inside one memory root.

Memory files link to each other the way people write them (``[Alice](../people/alice.md)``); the
``follow_links`` tool walks those links and the hygiene job rewrites them when it merges two files.
A link is only ever a path *relative to the file that holds it*, resolved as a string here and then
opened through the guarded store (which refuses symlinks, dot-names and anything outside the root
with ``openat``): a URL, an absolute path, a percent-encoded ``..`` or a path that climbs out of the
root resolves to nothing, whatever the file says.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

# [text](target "title") and [text](<target with spaces>); images (![..](..)) are links too.
INLINE = re.compile(r"\[(?P<text>[^\]\n]*)\]\(\s*(?:<(?P<angle>[^>\n]*)>|(?P<bare>[^)\s]*))(?:\s+\"[^\"\n]*\")?\s*\)")
# [label]: target
REFERENCE = re.compile(r"^\s{0,3}\[(?P<text>[^\]\n]+)\]:\s*(?:<(?P<angle>[^>\n]*)>|(?P<bare>\S+))", re.MULTILINE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
SAME_FILE = "a link inside the same file"


@dataclass(frozen=True, slots=True)
class Link:
    text: str
    target: str  # as written in the file
    start: int  # offsets of the target in the file's text (for rewriting)
    end: int


@dataclass(frozen=True, slots=True)
class Resolved:
    link: Link
    path: str  # root-relative path, "" when refused
    refused: str = ""  # why it leads nowhere inside the root


def links(text: str) -> list[Link]:
    out = []
    for pattern in (INLINE, REFERENCE):
        for m in pattern.finditer(text):
            group = "angle" if m.group("angle") is not None else "bare"
            target = m.group(group) or ""
            if target:
                out.append(Link(text=m.group("text"), target=target, start=m.start(group), end=m.end(group)))
    out.sort(key=lambda link: link.start)
    return out


def resolve(source: str, target: str) -> tuple[str, str]:
    """``(path, "")`` for a link in file ``source`` that stays inside the root, else ``("", reason)``."""
    raw = target.strip()
    if _SCHEME.match(raw):
        return "", "not a memory file (a URL)"
    raw = raw.split("#", 1)[0].split("?", 1)[0]
    if not raw:
        return "", SAME_FILE
    decoded = unquote(raw)
    if "\x00" in decoded or "\\" in decoded:
        return "", "not a valid path"
    if decoded.startswith("/") or _SCHEME.match(decoded):
        return "", "outside your memory (an absolute path)"
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(source), decoded))
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        return "", "outside your memory"
    if joined == "." or any(part.startswith(".") for part in joined.split("/")):
        return "", "not a memory file (a reserved name)"
    return joined, ""


def resolved(source: str, text: str) -> list[Resolved]:
    out = []
    for link in links(text):
        path, why = resolve(source, link.target)
        out.append(Resolved(link=link, path=path, refused=why))
    return out


def relative(source: str, path: str) -> str:
    """The link target that names ``path`` from a file at ``source``."""
    return posixpath.relpath(path, posixpath.dirname(source) or ".")


def rewrite(source: str, text: str, mapping: Callable[[str], str | None]) -> str:
    """``text`` (of file ``source``) with every link whose target resolves to a path ``mapping``
    renames pointed at the new path (relative to ``source``, fragment kept)."""
    pieces = []
    last = 0
    for link in links(text):
        path, why = resolve(source, link.target)
        new = mapping(path) if path and not why else None
        if new is None:
            continue
        fragment = link.target[link.target.index("#"):] if "#" in link.target else ""
        pieces.append(text[last:link.start])
        pieces.append(relative(source, new) + fragment)
        last = link.end
    pieces.append(text[last:])
    return "".join(pieces)
