"""The five curation ops, each a function of the run state and one validated op."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gateway.memory.curation.doc import Item, Section, SectionedDoc, Subsection, norm
from gateway.memory.curation.match import Located, locate_bullets, match_bullets, put
from gateway.memory.curation.types import OpError, Outcome, Rails

Result = tuple[Outcome, str, str]  # outcome, before text, after text


class RunState:
    """The evolving doc of one ``apply_ops`` call and what it has spent of the removal budget."""

    def __init__(self, doc: SectionedDoc, rails: Rails) -> None:
        self.doc = doc
        self.rails = rails
        self.bullets_before = doc.bullet_count()
        self.budget = int(self.bullets_before * rails.max_remove_fraction)
        self.removed = 0

    def find(self, title: str) -> int | None:
        key = norm(title)
        return next((i for i, s in enumerate(self.doc.sections) if norm(s.title) == key), None)

    def set_section(self, idx: int, sec: Section) -> None:
        sections = list(self.doc.sections)
        sections[idx] = sec
        self.doc = replace(self.doc, sections=tuple(sections))

    def ensure_section(self, title: str) -> int:
        idx = self.find(title)
        if idx is not None:
            return idx
        allowed = {norm(t) for t in self.rails.allowed_sections}
        if not self.rails.allow_new_sections and norm(title) not in allowed:
            raise OpError(f"section_not_allowed: {title!r} is not a whitelisted section")
        self.doc = replace(self.doc, sections=(*self.doc.sections, Section(title)))
        return len(self.doc.sections) - 1

    def spend(self, n: int) -> None:
        if self.removed + n > self.budget:
            raise OpError(
                f"removal_budget_exceeded: {self.removed} removed so far, this op removes {n}, limit is "
                f"{self.budget} of {self.bullets_before} bullets per run"
            )
        self.removed += n

    def has_bullet(self, text: str) -> bool:
        key = norm(text)
        return any(norm(b.item.text) == key for b in locate_bullets(self.doc, None))


def _sub_index(sec: Section, title: str) -> int | None:
    return next((j for j, s in enumerate(sec.subsections) if norm(s.title) == norm(title)), None)


def append(run: RunState, op: dict[str, str]) -> Result:
    if run.has_bullet(op["text"]):
        return "noop_dup", "", op["text"]
    idx = run.ensure_section(op["section"])
    sec = run.doc.sections[idx]
    bullet = Item("bullet", op["text"])
    sub = op.get("subheading")
    if sub is None:
        run.set_section(idx, replace(sec, items=(*sec.items, bullet)))
        return "applied", "", op["text"]
    subs = list(sec.subsections)
    j = _sub_index(sec, sub)
    if j is None:
        subs.append(Subsection(sub, (bullet,)))
    else:
        subs[j] = replace(subs[j], items=(*subs[j].items, bullet))
    run.set_section(idx, replace(sec, subsections=tuple(subs)))
    return "applied", "", op["text"]


def add_heading(run: RunState, op: dict[str, str]) -> Result:
    existed = run.find(op["section"]) is not None
    idx = run.ensure_section(op["section"])
    sub = op.get("subheading")
    if sub is None:
        return ("noop_dup" if existed else "applied"), "", op["section"]
    sec = run.doc.sections[idx]
    if _sub_index(sec, sub) is not None:
        return "noop_dup", "", sub
    run.set_section(idx, replace(sec, subsections=(*sec.subsections, Subsection(sub))))
    return "applied", "", sub


def _target(run: RunState, op: dict[str, str], text: str) -> tuple[int, list[Located]] | None:
    idx = run.find(op["section"])
    if idx is None:
        return None
    found = match_bullets(run.doc, idx, text)
    if "subheading" in op:
        sec = run.doc.sections[idx]
        j = _sub_index(sec, op["subheading"])
        found = [b for b in found if b.sub == j] if j is not None else []
    if len(found) > 1:
        raise OpError(f"ambiguous_match: {text!r} matches {len(found)} bullets; quote one exactly")
    return idx, found


def remove(run: RunState, op: dict[str, str]) -> Result:
    hit = _target(run, op, op["text"])
    if hit is None or not hit[1]:
        return "noop_no_match", op["text"], ""
    loc = hit[1][0]
    run.spend(1)
    run.doc = put(run.doc, loc, None)
    return "applied", loc.item.text, ""


def replace_bullet(run: RunState, op: dict[str, str]) -> Result:
    hit = _target(run, op, op["old"])
    if hit is None or not hit[1]:
        return "noop_no_match", op["old"], op["new"]
    loc = hit[1][0]
    if norm(loc.item.text) == norm(op["new"]):
        return "noop_dup", loc.item.text, op["new"]
    if run.has_bullet(op["new"]):
        raise OpError("duplicate_of_existing: the new text is already a bullet; use remove instead")
    run.doc = put(run.doc, loc, replace(loc.item, text=op["new"]))  # marker and nested lines kept
    return "applied", loc.item.text, op["new"]


def remove_heading(run: RunState, op: dict[str, str]) -> Result:
    idx = run.find(op["section"])
    if idx is None:
        return "noop_no_match", op["section"], ""
    sec = run.doc.sections[idx]
    sub = op.get("subheading")
    if sub is not None:
        j = _sub_index(sec, sub)
        if j is None:
            return "noop_no_match", sub, ""
        # Prose lines count like bullets here: removing a heading must not be a free way to delete text.
        run.spend(sum(1 for i in sec.subsections[j].items if i.kind != "blank"))
        subs = sec.subsections[:j] + sec.subsections[j + 1 :]
        run.set_section(idx, replace(sec, subsections=subs))
        return "applied", sub, ""
    items = [*sec.items, *(i for s in sec.subsections for i in s.items)]
    run.spend(sum(1 for i in items if i.kind != "blank"))
    run.doc = replace(run.doc, sections=run.doc.sections[:idx] + run.doc.sections[idx + 1 :])
    return "applied", sec.title, ""


HANDLERS: dict[str, Callable[[RunState, dict[str, str]], Result]] = {
    "append": append,
    "add_heading": add_heading,
    "remove": remove,
    "replace": replace_bullet,
    "remove_heading": remove_heading,
}
