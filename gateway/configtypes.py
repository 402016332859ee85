"""What every config section is built from: the section base, the error, and the typed fields.

The bottom of the configuration: ``gateway/config.py`` (the host's sections), the stages' settings
(``gateway/memory/settings.py``, ``gateway/memory/background/settings.py``, ``gateway/mcp/settings.py``),
the channel sections (``gateway/channels.py``, the adapters' own) and third-party plugins all build on
this module, which imports nothing else of kith, so any of them can import it without a cycle.

``ModelRole`` marks a field that names a model role: the config check finds every such field by
walking the validated models (``model_roles``), so a stage or a channel that adds one gets its role
checked against ``llm.roles`` without a line in the host.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


class ConfigError(Exception):
    """All problems found in a configuration, one per line."""

    def __init__(self, problems: Iterable[str], source: str = "") -> None:
        self.problems = list(problems)
        self.source = source
        head = f"invalid configuration{f' in {source}' if source else ''}"
        super().__init__(head + ":\n" + "\n".join(f"  - {p}" for p in self.problems))


class Section(BaseModel):
    """A config section: unknown keys are refused (a typo is an error, never a silent default)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


# ---------------------------------------------------------------------------------------- model roles

ROLE_NAME = r"^[a-z][a-z0-9_-]{0,31}$"


class _RoleMark:
    """The marker in ``ModelRole``'s metadata that ``model_roles`` looks for."""

    def __repr__(self) -> str:
        return "ModelRole"


_ROLE = _RoleMark()

#: A model role by name: main, cheap, vision, transcription or one under ``llm.roles`` (checked at load).
ModelRole = Annotated[str, Field(pattern=ROLE_NAME), _ROLE]


def _names_a_role(annotation: Any) -> bool:
    """``ModelRole``, or a union with it (``ModelRole | None``)."""
    if get_origin(annotation) is Annotated:
        return any(m is _ROLE for m in annotation.__metadata__)
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_names_a_role(a) for a in get_args(annotation))
    return False


def model_roles(node: object, path: str = "") -> Iterator[tuple[str, str]]:
    """``(key path, role)`` for every ``ModelRole`` field set in ``node`` and the sections, lists and
    mappings below it, in field order."""
    if isinstance(node, BaseModel):
        for name, info in type(node).model_fields.items():
            value = getattr(node, name)
            where = f"{path}.{name}" if path else name
            if isinstance(value, str) and (any(m is _ROLE for m in info.metadata) or _names_a_role(info.annotation)):
                yield where, value
            else:
                yield from model_roles(value, where)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from model_roles(value, f"{path}.{key}")
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from model_roles(value, f"{path}[{i}]")


# --------------------------------------------------------------------------------------------- cron


def _cron(v: str) -> str:
    from croniter import croniter

    if (len(v.split()) != 5 and not v.startswith("@")) or not croniter.is_valid(v):
        raise ValueError(f"invalid cron expression {v!r} (5 fields expected)")
    return v


#: A 5-field cron expression (or ``@daily`` and the like), checked at load.
Cron = Annotated[str, AfterValidator(_cron)]
