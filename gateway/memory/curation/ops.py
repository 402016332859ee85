"""Apply a model's curation ops to a profile, one at a time, under rails enforced here in code.

Every op is validated on its own: a bad op is rejected with a reason and the rest still apply, and
``apply_ops`` never raises on model output. The rails do not trust the prompt: a cap on ops per run,
a removal budget of a quarter of the bullets present before the run, and no new ``##`` sections
outside a whitelist unless the operator allows them. Op shapes and reasons: docs/knowledge.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from gateway.memory.curation.doc import SectionedDoc
from gateway.memory.curation.handlers import HANDLERS, RunState
from gateway.memory.curation.types import Admit, Applied, OpError, Rails, Rejected, Screen

log = logging.getLogger(__name__)

_TEXT_FIELDS = {"append": ("text",), "remove": ("text",), "replace": ("old", "new")}
_SCREENED = ("text", "new", "section", "subheading")


def clip(raw: Any, limit: int = 2000) -> Any:
    """A JSON-safe, bounded copy of whatever the model sent, for the audit and the rejected list."""
    try:
        text = json.dumps(raw, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(raw)
    if len(text) <= limit:
        return json.loads(text)
    return text[:limit] + "…"


def _field(raw: dict[str, Any], key: str, rails: Rails, *, required: bool = True, title: bool = False) -> str:
    value = raw.get(key)
    if value is None or value == "":
        if required:
            raise OpError(f"missing_field: {key!r}")
        return ""
    if not isinstance(value, str):
        raise OpError(f"bad_field_type: {key!r} must be a string")
    text = value.strip()
    if "\n" in text or "\r" in text:
        raise OpError(f"multiline_text: {key!r} must be one line")
    if title:
        text = text.lstrip("#").rstrip("#").strip()  # "## Work ##" -> "Work"
        limit = rails.max_title_chars
    else:
        text = text[2:].strip() if text[:2] in ("- ", "* ", "+ ") else text  # a bullet marker is ours
        limit = rails.max_text_chars
    if not text:
        raise OpError(f"empty_text: {key!r}")
    if len(text) > limit:
        raise OpError(f"text_too_long: {key!r} has {len(text)} characters, limit {limit}")
    return text


def validate(raw: Any, rails: Rails, screen: Screen | None = None) -> dict[str, str]:
    """One model op -> normalised op dict; raises OpError with the reject reason."""
    if not isinstance(raw, dict):
        raise OpError(f"not_an_object: got {type(raw).__name__}")
    name = raw.get("op")
    if name not in HANDLERS:
        raise OpError(f"unknown_op: {name!r}")
    op = {"op": str(name), "section": _field(raw, "section", rails, title=True)}
    sub = _field(raw, "subheading", rails, required=False, title=True)
    if sub:
        op["subheading"] = sub
    for key in _TEXT_FIELDS.get(str(name), ()):
        op[key] = _field(raw, key, rails)
    if screen is not None and name in ("append", "replace", "add_heading"):
        for key in _SCREENED:
            reason = screen(op[key]) if key in op else None
            if reason:
                raise OpError(f"quarantined: {reason}")
    return op


def unwrap(payload: Any) -> Sequence[Any] | None:
    """Accept ``[...]`` or ``{"ops": [...]}``; None when neither."""
    if isinstance(payload, dict) and "ops" in payload:
        payload = payload["ops"]
    return payload if isinstance(payload, list) else None


def apply_ops(
    doc: SectionedDoc, ops: Any, rails: Rails | None = None, *, screen: Screen | None = None,
    admit: Admit | None = None,
) -> tuple[SectionedDoc, list[Applied], list[Rejected]]:
    """Apply each op in order; return the new doc, the applied ops (with outcomes) and the rejected
    ones (with reasons). ``doc`` itself is never modified. Never raises. ``admit`` is the caller's own
    rail, asked about each validated op before it runs (the memory writer refuses a removal of a line
    its prompt did not show)."""
    rails = rails or Rails()
    items = unwrap(ops)
    if items is None:
        return doc, [], [Rejected(index=-1, op=clip(ops), reason="not_a_list: expected [...] or {'ops': [...]}")]
    run = RunState(doc, rails)
    applied: list[Applied] = []
    rejected: list[Rejected] = []
    for i, raw in enumerate(items):
        if i >= rails.max_ops:
            rejected.append(Rejected(index=i, op=clip(raw), reason=f"cap_exceeded: at most {rails.max_ops} ops"))
            continue
        try:
            op = validate(raw, rails, screen)
            refused = admit(op) if admit is not None else None
            if refused:
                raise OpError(refused)
            outcome, before, after = HANDLERS[op["op"]](run, op)
        except OpError as exc:
            rejected.append(Rejected(index=i, op=clip(raw), reason=str(exc)))
            continue
        except Exception as exc:  # a bug here must cost one op, not the whole night
            log.exception("curation op %d failed unexpectedly", i)
            rejected.append(Rejected(index=i, op=clip(raw), reason=f"internal_error: {type(exc).__name__}"))
            continue
        applied.append(Applied(index=i, op=op, outcome=outcome, before=before, after=after))
    return run.doc, applied, rejected


def changed(applied: Sequence[Applied]) -> bool:
    """Outcome-based skip-write: rewrite only if some op really changed the doc. Comparing texts
    instead would rewrite files whose only difference is normalisation (CRLF, trailing spaces)."""
    return any(a.outcome == "applied" for a in applied)
