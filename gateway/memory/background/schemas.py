"""JSON schemas of the memory stages' answers, for providers that enforce structured output.

Where the provider can (``Capabilities.structured_output``: OpenAI-compatible ``response_format``,
Anthropic a forced tool call), extraction, the memory writer, curation and hygiene ask for their answer
as JSON of these schemas. The parsers (``model_output``, ``sleep.parse_curation``, ``hygiene.judged``)
read that JSON and, as before, the labelled-sections text of a model that answered without it: a
schema narrows what a model can get wrong, it never replaces the checks on what it wrote.
"""

from __future__ import annotations

from typing import Any

from gateway.types import ResponseFormat

_STR: dict[str, Any] = {"type": "string"}
_OP: dict[str, Any] = {
    "type": "object",
    "properties": {
        "op": {"type": "string", "enum": ["append", "replace", "remove", "add_heading", "remove_heading"]},
        "section": _STR, "subheading": _STR, "text": _STR, "old": _STR, "new": _STR,
    },
    "required": ["op", "section"],
}  # fmt: skip
_OPS: dict[str, Any] = {"type": "array", "items": _OP}

EXTRACTION = ResponseFormat(name="night_memory", description="The day's memories, facts and topics.", schema={
    "type": "object",
    "properties": {
        "memories": {"type": "array", "items": _STR},
        "facts": {"type": "array", "items": {"type": "object", "properties": {
            "subject": _STR, "predicate": _STR, "object": _STR, "valid_from": _STR, "valid_until": _STR,
            "confidence": {"type": "number"}}, "required": ["subject", "predicate", "object"]}},
        "topics": {"type": "array", "items": {"type": "object", "properties": {
            "topic": _STR, "weight": {"type": "number"}}, "required": ["topic", "weight"]}},
    },
    "required": ["memories", "facts", "topics"],
})  # fmt: skip

_NOTE = {"slug": _STR, "ops": _OPS}
WRITER = ResponseFormat(name="memory_notes", description="The session summary and the line edits of notes.",
                        schema={
    "type": "object",
    "properties": {
        "summary": _STR,
        "people": {"type": "array", "items": {"type": "object", "properties": {
            **_NOTE, "name": _STR, "aliases": {"type": "array", "items": _STR}}, "required": ["slug", "ops"]}},
        "topics": {"type": "array", "items": {"type": "object", "properties": {**_NOTE, "title": _STR},
                                              "required": ["slug", "ops"]}},
    },
    "required": ["summary", "people", "topics"],
})  # fmt: skip

CURATION = ResponseFormat(name="profile_ops", description="Line edits of USER.md and PATTERNS.md.", schema={
    "type": "object", "properties": {"ops": _OPS, "patterns": _OPS}, "required": ["ops"],
})  # fmt: skip

HYGIENE = ResponseFormat(name="hygiene_findings", description="Problems found in the memory.", schema={
    "type": "object",
    "properties": {"proposals": {"type": "array", "items": {"type": "object", "properties": {
        "kind": {"type": "string", "enum": ["conflict", "stale", "promote", "playbook"]}, "file": _STR,
        "lines": {"type": "array", "items": {"type": "integer"}}, "replace_with": _STR, "to": _STR,
        "title": _STR, "why": _STR}, "required": ["kind", "file", "lines"]}}},
    "required": ["proposals"],
})  # fmt: skip
