"""The ``skill`` tool: a skill's instructions, or one of its files, on demand (``gateway.skills``).

Offered only in a turn that has skills (the operator's, the speaking persona's): its description is
that turn's catalogue, each skill's name and description, so a skill costs the prompt only its
catalogue line until the model loads it. Reading a skill writes nothing and reads no one's memory:
it is offered Off-The-Record and in groups alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gateway import skills
from gateway.personas.choice import turn_persona
from gateway.tools import Tool, ToolContext, ToolError
from gateway.types import Turn

if TYPE_CHECKING:
    from gateway.services import Services

INTRO = ("Skills: instructions for tasks. Before doing a task one covers, load it by name; "
         "with file, read a file it names.")


def catalogue_for(gateway: Services, turn: Turn) -> skills.Catalogue:
    return skills.for_persona(gateway.config, turn_persona(gateway, turn))


def describe(gateway: Services, turn: Turn) -> str | None:
    found = catalogue_for(gateway, turn).skills[: gateway.config.tools.skills.max_catalogue]
    if not found:
        return None
    return INTRO + "\n" + "\n".join(f"- {s.name}: {s.description}" for s in found)


async def load_skill(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    name = args.get("name")
    book = catalogue_for(ctx.gateway, ctx.turn)
    skill = book.get(name) if isinstance(name, str) else None
    if skill is None:
        raise ToolError(f"no skill named {name!r}; skills: {', '.join(s.name for s in book.skills) or 'none'}")
    wanted = args.get("file")
    try:
        if isinstance(wanted, str) and wanted.strip():
            return f"File {wanted.strip()} of skill {skill.name}:\n\n{skills.read_file(skill, wanted)}"
        _, body = skills.read_skill(skill.root, skill.origin)
        listed = skills.files(skill)
    except skills.SkillError as exc:
        raise ToolError(str(exc).replace(str(skill.root), skill.name)) from None
    more = f"\n\nFiles of this skill (read one with file): {', '.join(listed)}" if listed else ""
    return f"Skill {skill.name}: follow these instructions.\n\n{body}{more}"


TOOL = Tool(
    name="skill",
    description=INTRO,  # each turn's own catalogue replaces it (describe)
    input_schema={"type": "object", "properties": {
        "name": {"type": "string"},
        "file": {"type": "string", "description": "a file of the skill, e.g. references/x.md"},
    }, "required": ["name"]},
    handler=load_skill, describe=describe, min_tier=2, private=False,
)
