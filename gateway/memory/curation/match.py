"""Finding bullets inside a section (including its ``###`` subsections) and editing them in place."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.memory.curation.doc import Item, SectionedDoc, norm

MIN_SUBSTRING = 12  # shorter fragments match too much to be a safe target for remove/replace


@dataclass(frozen=True, slots=True)
class Located:
    section: int
    sub: int | None  # index into subsections, None for the section's own items
    pos: int  # index into that container's items
    item: Item


def locate_bullets(doc: SectionedDoc, section: int | None) -> list[Located]:
    """Every bullet of one section, or of the whole doc when ``section`` is None."""
    out: list[Located] = []
    for si, sec in enumerate(doc.sections):
        if section is not None and si != section:
            continue
        out.extend(Located(si, None, p, it) for p, it in enumerate(sec.items) if it.kind == "bullet")
        for ji, sub in enumerate(sec.subsections):
            out.extend(Located(si, ji, p, it) for p, it in enumerate(sub.items) if it.kind == "bullet")
    return out


def match_bullets(doc: SectionedDoc, section: int, text: str) -> list[Located]:
    """Exact (normalised) matches; failing those, bullets containing ``text`` if it is long enough.

    Several exact matches of identical text are one target (the first), since removing or replacing
    any of them is the same edit.
    """
    key = norm(text)
    bullets = locate_bullets(doc, section)
    exact = [b for b in bullets if norm(b.item.text) == key]
    if exact:
        return exact[:1]
    if len(key) < MIN_SUBSTRING:
        return []
    return [b for b in bullets if key in norm(b.item.text)]


def put(doc: SectionedDoc, loc: Located, item: Item | None) -> SectionedDoc:
    """Replace the bullet at ``loc`` with ``item``, or drop it when ``item`` is None."""
    sec = doc.sections[loc.section]
    items = list(sec.items if loc.sub is None else sec.subsections[loc.sub].items)
    if item is None:
        del items[loc.pos]
    else:
        items[loc.pos] = item
    if loc.sub is None:
        sec = replace(sec, items=tuple(items))
    else:
        subs = list(sec.subsections)
        subs[loc.sub] = replace(subs[loc.sub], items=tuple(items))
        sec = replace(sec, subsections=tuple(subs))
    sections = list(doc.sections)
    sections[loc.section] = sec
    return replace(doc, sections=tuple(sections))
