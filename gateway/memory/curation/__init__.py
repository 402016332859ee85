"""USER.md curation by operations: parse, apply validated ops under rails, audit, roll back.

Pure and self-contained: it imports nothing outside ``gateway.memory.curation`` but the host's
JSON-lines reader (``gateway.util.jsonl``, a leaf); storage (``Writer``) and the poisoning screen
(``Screen``) are passed in by the caller (the sleep cycle, the CLI).
"""

from gateway.memory.curation.doc import Item, Section, SectionedDoc, Subsection, parse, serialize
from gateway.memory.curation.ops import apply_ops, changed, validate
from gateway.memory.curation.run import CurationResult, RollbackResult, curate, rollback
from gateway.memory.curation.types import DEFAULT_SECTIONS, Admit, Applied, Rails, Rejected, Screen, Writer

__all__ = [
    "DEFAULT_SECTIONS",
    "Admit",
    "Applied",
    "CurationResult",
    "Item",
    "Rails",
    "Rejected",
    "RollbackResult",
    "Screen",
    "Section",
    "SectionedDoc",
    "Subsection",
    "Writer",
    "apply_ops",
    "changed",
    "curate",
    "parse",
    "rollback",
    "serialize",
    "validate",
]
