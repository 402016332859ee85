"""A profile file as data: preamble, ``##`` sections, ``###`` subsections, bullets and prose lines.

Parsing is total (any text parses) and serialisation is canonical: CRLF becomes LF, trailing
whitespace goes, runs of blank lines collapse, and ``serialize(parse(serialize(parse(t))))`` equals
``serialize(parse(t))``. Content is never reordered or dropped. Lines inside fenced code blocks are
prose, so a ``## `` inside a fence is not a heading.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

_BULLET = re.compile(r"^(?P<marker>[-*+]|\d{1,9}[.)])[ \t]+(?P<text>\S.*)$")
_HEADING = re.compile(r"^(?P<level>#{2,3})[ \t]+(?P<title>.*?)(?:[ \t]+#+)?$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")

ItemKind = Literal["bullet", "text", "blank"]


@dataclass(frozen=True, slots=True)
class Item:
    kind: ItemKind
    text: str = ""  # bullet: text after the marker; text: the line as written
    marker: str = "-"
    cont: tuple[str, ...] = ()  # indented lines belonging to a bullet (wrapped text, sub-bullets)

    def render(self) -> list[str]:
        if self.kind == "bullet":
            return [f"{self.marker} {self.text}", *self.cont]
        return [self.text] if self.kind == "text" else [""]


@dataclass(frozen=True, slots=True)
class Subsection:
    title: str
    items: tuple[Item, ...] = ()


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    items: tuple[Item, ...] = ()
    subsections: tuple[Subsection, ...] = ()

    def bullets(self) -> list[Item]:
        out = [i for i in self.items if i.kind == "bullet"]
        for sub in self.subsections:
            out.extend(i for i in sub.items if i.kind == "bullet")
        return out


@dataclass(frozen=True, slots=True)
class SectionedDoc:
    preamble: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()

    def bullet_count(self) -> int:
        return sum(len(s.bullets()) for s in self.sections)


def norm(text: str) -> str:
    """Match key for titles and bullets: NFKC, casefolded, whitespace collapsed, end dot dropped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).rstrip(".").strip()


def _tidy(items: list[Item]) -> tuple[Item, ...]:
    out: list[Item] = []
    for item in items:
        if item.kind == "blank" and (not out or out[-1].kind == "blank"):
            continue
        out.append(item)
    while out and out[-1].kind == "blank":
        out.pop()
    return tuple(out)


def parse(text: str) -> SectionedDoc:
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    preamble: list[Item] = []
    sections: list[tuple[str, list[Item], list[tuple[str, list[Item]]]]] = []
    target = preamble
    in_fence = False
    for line in lines:
        if _FENCE.match(line):
            in_fence = not in_fence
        head = None if in_fence or _FENCE.match(line) else _HEADING.match(line)
        if head and not head.group("title").strip():
            head = None  # "## " alone is not a heading in a round trip ("##" re-parses as text)
        if head and head.group("level") == "##":
            sections.append((head.group("title").strip(), [], []))
            target = sections[-1][1]
            continue
        if head and sections:  # "###": a subsection (in the preamble it is just text)
            sections[-1][2].append((head.group("title").strip(), []))
            target = sections[-1][2][-1][1]
            continue
        bullet = None if in_fence else _BULLET.match(line)
        if not line:
            target.append(Item("blank"))
        elif bullet:
            target.append(Item("bullet", bullet.group("text"), bullet.group("marker")))
        elif line[0] in " \t" and target and target[-1].kind == "bullet" and not in_fence:
            last = target[-1]
            target[-1] = Item("bullet", last.text, last.marker, (*last.cont, line))
        else:
            target.append(Item("text", line))
    pre = _tidy(_strip_leading(preamble))
    return SectionedDoc(
        preamble=tuple(line for item in pre for line in item.render()),
        sections=tuple(
            Section(
                title,
                _tidy(_strip_leading(items)),
                tuple(Subsection(t, _tidy(_strip_leading(it))) for t, it in subs),
            )
            for title, items, subs in sections
        ),
    )


def _strip_leading(items: list[Item]) -> list[Item]:
    i = 0
    while i < len(items) and items[i].kind == "blank":
        i += 1
    return items[i:]


def _render(items: tuple[Item, ...]) -> list[str]:
    # Tidy again: an op that removed a bullet may have left two blank items side by side.
    return [line for item in _tidy(_strip_leading(list(items))) for line in item.render()]


def serialize(doc: SectionedDoc) -> str:
    out: list[str] = list(doc.preamble)
    for sec in doc.sections:
        if out:
            out.append("")
        out.append(f"## {sec.title}".rstrip())
        out.extend(_render(sec.items))
        for sub in sec.subsections:
            out.extend(["", f"### {sub.title}".rstrip()])
            out.extend(_render(sub.items))
    return "\n".join(out) + "\n" if out else ""
