"""Value types shared by the curation modules, and the file-access protocol they write through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

DEFAULT_SECTIONS: tuple[str, ...] = (
    "Identity", "Work", "Preferences", "Communication", "People", "Projects", "Interests", "Health",
    "Routines", "Goals", "Notes",
)  # fmt: skip

Outcome = Literal["applied", "noop_dup", "noop_no_match"]
# text -> reason to refuse it, or None. The poisoning guard plugs in here (guard.screen_text).
Screen = Callable[[str], str | None]
# validated op -> reason to refuse it ("<code>: <detail>"), or None: a caller's rail on top of the rails.
Admit = Callable[[dict[str, str]], str | None]


class Writer(Protocol):
    """What curation needs from storage; ``gateway.memory.files.store.MemoryStore`` satisfies it."""

    def read(self, rel: str) -> str: ...

    def exists(self, rel: str) -> bool: ...

    def write(self, rel: str, text: str, *, source: str, message_id: str = "", trust: str = "system") -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Rails:
    """Limits enforced in code, whatever the prompt or the model says."""

    max_ops: int = 20  # ops beyond this many in one run are rejected unseen
    max_remove_fraction: float = 0.25  # of the bullets present before the run
    allowed_sections: tuple[str, ...] = DEFAULT_SECTIONS  # new "##" sections must be one of these
    allow_new_sections: bool = False  # True lifts the whitelist
    max_text_chars: int = 500
    max_title_chars: int = 80


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    index: int  # position in the model's op list
    op: dict[str, str]  # the op as validated (normalised fields)
    outcome: Outcome
    before: str = ""  # bullet text before the op ("" for additions)
    after: str = ""  # bullet text after the op ("" for removals)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected:
    index: int  # -1 when the whole payload was unusable
    op: Any  # what the model sent, JSON-safe and clipped
    reason: str  # "<code>: <detail>", code one of the reasons in docs/knowledge.md


class OpError(Exception):
    """An op failed validation or a rail; ``str(exc)`` is the reject reason."""
