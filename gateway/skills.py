"""Skills: folders with a ``SKILL.md``, in the Agent Skills format other assistants share.

A skill is a folder whose ``SKILL.md`` starts with YAML front matter (``name``: 1-64 of a-z, 0-9 and
single hyphens, the folder's own name; ``description``: what it does and when to use it, at most 1,024
characters; optional ``license``, ``compatibility``, ``metadata``, ``allowed-tools``) followed by the
instructions in Markdown. The folder may hold more files (``references/``, ``assets/``, ``scripts/``):
the instructions name them, and they are read only when asked for.

Loading is progressive, so skills cost tokens only when used: the catalogue (each skill's name and
description) is what a turn's prompt carries; the ``skill`` tool (``plugins.tools.skill_tool``) reads a
skill's instructions, and one of its files, on demand.

Two places hold skills: the operator's folders (``tools.skills.dirs``), and the speaking persona's
``<data_dir>/personas/<name>/skills/``; a persona's skill of the same name as an operator's wins.
Reading is defensive: front matter is parsed with ``yaml.safe_load`` after a size check, a broken skill
is reported (``kith skills list``, a log line) and left out without hiding the others, and a file is
read only if it resolves inside its skill's folder (no ``..``, no symbolic link out), is a regular file
within the size limit and is text. Scripts are never run: kith reads files, it executes nothing.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.config import Config

log = logging.getLogger("kith.skills")

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 100_000  # a SKILL.md; the format asks for well under 5,000 tokens of instructions
MAX_FRONT_MATTER = 8_000  # characters of YAML: a catalogue entry, not a document
MAX_RESOURCE_BYTES = 200_000  # one file of a skill read on request (what reaches the model is cut further)
MAX_DESCRIPTION = 1024
MAX_SKILLS_PER_DIR = 200  # folders looked at in one skills directory
MAX_LISTED_FILES = 50  # a skill's files named to the model
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){0,63}$")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


class SkillError(Exception):
    """A skill that cannot be read, or a file of it that may not be (the message says which and why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    name: str
    description: str
    root: Path  # the skill's folder
    origin: str  # "operator" or "persona:<name>"
    metadata: Mapping[str, Any] = field(default_factory=dict)  # the other front matter keys, as written


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """A folder that looks like a skill but cannot be one; it is left out, the others stay."""

    path: Path
    message: str


@dataclass(frozen=True, slots=True)
class Catalogue:
    skills: tuple[Skill, ...]
    problems: tuple[Problem, ...] = ()

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


def _read_capped(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, opened without following a final link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise SkillError(f"{path.name}: cannot be opened ({exc.strerror or type(exc).__name__})") from exc
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise SkillError(f"{path.name}: not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise SkillError(f"{path.name}: larger than {limit:,} bytes")
    return data


def _text(data: bytes, what: str) -> str:
    if b"\x00" in data:
        raise SkillError(f"{what}: not a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkillError(f"{what}: not UTF-8 text") from exc


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(the front matter as a mapping, the body) of a SKILL.md's text; SkillError if malformed."""
    match = _FRONT.match(text)
    if match is None:
        raise SkillError("SKILL.md must start with YAML front matter between '---' lines")
    raw = match.group(1)
    if len(raw) > MAX_FRONT_MATTER:
        raise SkillError(f"the front matter is longer than {MAX_FRONT_MATTER:,} characters")
    import yaml

    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 2})" if where is not None else ""
        raise SkillError(f"the front matter is not valid YAML{at}") from exc
    if not isinstance(data, dict):
        raise SkillError("the front matter must be a mapping of keys (name, description, ...)")
    return data, text[match.end():]


def parse(text: str, folder: Path, origin: str) -> tuple[Skill, str]:
    """The skill a SKILL.md's ``text`` in ``folder`` describes, and its instructions."""
    data, body = split_front_matter(text)
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SkillError("'name' must be 1-64 of a-z, 0-9 and single hyphens, not starting or ending with one")
    if name != folder.name:
        raise SkillError(f"'name' is {name!r} but the folder is {folder.name!r}: they must match")
    if not isinstance(description, str) or not description.strip():
        raise SkillError("'description' is missing: say what the skill does and when to use it")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION:
        raise SkillError(f"'description' is longer than {MAX_DESCRIPTION} characters")
    metadata = {k: v for k, v in data.items() if k not in ("name", "description")}
    return Skill(name=name, description=description, root=folder, origin=origin, metadata=metadata), body.strip()


def read_skill(folder: Path, origin: str) -> tuple[Skill, str]:
    """The skill in ``folder`` and its instructions, read now (the file may have changed)."""
    path = folder / SKILL_FILE
    try:
        return parse(_text(_read_capped(path, MAX_SKILL_BYTES), SKILL_FILE), folder, origin)
    except SkillError as exc:
        raise SkillError(f"{folder}: {exc}") from None


# SKILL.md path -> (mtime_ns, size, the skill or its problem): a turn re-reads only what changed.
_seen: dict[Path, tuple[int, int, Skill | Problem]] = {}


def _scan_one(folder: Path, origin: str) -> Skill | Problem | None:
    path = folder / SKILL_FILE
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Problem(path=folder, message=f"{folder}: {exc.strerror}")
    cached = _seen.get(path)
    if cached is not None and cached[:2] == (st.st_mtime_ns, st.st_size) and (
            not isinstance(cached[2], Skill) or cached[2].origin == origin):
        return cached[2]
    try:
        found: Skill | Problem = read_skill(folder, origin)[0]
    except SkillError as exc:
        log.warning("skill left out: %s", exc)
        found = Problem(path=folder, message=str(exc))
    _seen[path] = (st.st_mtime_ns, st.st_size, found)
    return found


def scan(root: Path, origin: str) -> tuple[list[Skill], list[Problem]]:
    """The skills in the folders of ``root`` (one level: ``root/<name>/SKILL.md``), by name."""
    skills: list[Skill] = []
    problems: list[Problem] = []
    try:
        entries = sorted((e for e in os.scandir(root) if not e.name.startswith(".")), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        # A persona without skills has no folder; an operator's folder that is not there is a mistake.
        missing = [] if origin.startswith("persona:") else [Problem(path=root, message=f"{root}: no such folder")]
        return skills, missing
    except OSError as exc:
        return skills, [Problem(path=root, message=f"{root}: {exc.strerror}")]
    if len(entries) > MAX_SKILLS_PER_DIR:
        problems.append(Problem(path=root, message=f"{root}: more than {MAX_SKILLS_PER_DIR} folders; the rest "
                                                   "are left out"))  # fmt: skip
    for entry in entries[:MAX_SKILLS_PER_DIR]:
        if not entry.is_dir(follow_symlinks=False):
            continue
        found = _scan_one(Path(entry.path), origin)
        if isinstance(found, Skill):
            skills.append(found)
        elif found is not None:
            problems.append(found)
    return skills, problems


def catalogue(sources: Iterable[tuple[Path, str]]) -> Catalogue:
    """Every skill of ``sources`` ((folder, origin), in order); a later source's skill replaces an
    earlier one's of the same name (a persona's over the operator's)."""
    by_name: dict[str, Skill] = {}
    problems: list[Problem] = []
    for root, origin in sources:
        skills, found = scan(root, origin)
        problems += found
        for skill in skills:
            by_name[skill.name] = skill
    return Catalogue(tuple(sorted(by_name.values(), key=lambda s: s.name)), tuple(problems))


def files(skill: Skill) -> list[str]:
    """The skill's other files (relative paths, dot names and links skipped), at most MAX_LISTED_FILES."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(skill.root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and not os.path.islink(os.path.join(dirpath, d)))  # fmt: skip
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if name.startswith(".") or path.is_symlink() or path == skill.root / SKILL_FILE:
                continue
            found.append(path.relative_to(skill.root).as_posix())
            if len(found) >= MAX_LISTED_FILES:
                return found
    return found


def read_file(skill: Skill, relative: str) -> str:
    """One file of ``skill``, by its path inside the skill's folder. Refused: absolute paths, ``..``,
    dot names, anything that resolves outside the folder (a link included), non-files, files over
    MAX_RESOURCE_BYTES and files that are not text."""
    rel = relative.strip().replace("\\", "/")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or rel.startswith("/") or any(p == ".." or p.startswith(".") for p in parts):
        raise SkillError(f"{relative!r} is not a file of the skill (use a path inside its folder)")
    root = skill.root.resolve()
    path = root.joinpath(*parts)
    if not path.resolve().is_relative_to(root) or any(
            root.joinpath(*parts[:i]).is_symlink() for i in range(1, len(parts) + 1)):
        raise SkillError(f"{relative!r} is not a file of the skill (use a path inside its folder)")
    if path.name == SKILL_FILE and len(parts) == 1:
        raise SkillError("SKILL.md is the skill itself: load the skill by its name")
    return _text(_read_capped(path, MAX_RESOURCE_BYTES), relative)


def sources(config: Config, persona: str | None) -> list[tuple[Path, str]]:
    """Where the skills of a turn with ``persona`` speaking come from, in order of precedence (last wins)."""
    from gateway.personas import PersonaError, persona_root

    cfg = config.tools.skills
    found = [(Path(d).expanduser(), "operator") for d in cfg.dirs]
    if persona and cfg.personas:
        try:
            found.append((persona_root(config.data_dir, persona) / "skills", f"persona:{persona}"))
        except PersonaError:
            pass  # a persona name that cannot be a folder has no skills
    return found


def for_persona(config: Config, persona: str | None) -> Catalogue:
    if not config.tools.skills.enabled:
        return Catalogue(())
    return catalogue(sources(config, persona))
