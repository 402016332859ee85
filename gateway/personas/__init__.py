"""Personas: who the assistant is, as plain files under ``<data_dir>/personas/<name>/``.

``IDENTITY.md`` (who), ``SOUL.md`` (values, voice), ``PROTOCOLS.md`` (how to behave), ``CONTEXT_TIERS.md``
(what loads at which tier) and ``HELP.md`` (persona-specific ``/help`` text). Loading reads plain
Markdown and knows no import format, so a later Character Card or lorebook importer only has to write
these files (and ``lore/``). New personas are bootstrapped from templates shipped in this package
(``templates/<name>/``) or copied from an existing persona; ``$name`` in a template becomes the
persona's display name. Every write goes through the guarded ``MemoryStore`` of the persona's root.
It may import ``gateway.config`` and ``gateway.memory.files``; never adapters or plugins.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

from gateway.config import PERSONA_NAME
from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.store import MemoryEntry, MemoryStore
from gateway.memory.files.stores import Stores
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.personas")

PERSONA_FILES: tuple[str, ...] = ("IDENTITY.md", "SOUL.md", "PROTOCOLS.md", "CONTEXT_TIERS.md", "HELP.md")
_NAME = re.compile(PERSONA_NAME)


class PersonaError(Exception):
    """A persona that cannot be created or read (bad name, unknown template, already exists)."""


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise PersonaError(f"invalid persona name {name!r}: use 1-64 of a-z, 0-9, '-', '_', starting alphanumeric")
    return name


def persona_root(data_dir: Path, name: str) -> Path:
    return Path(data_dir) / "personas" / check_name(name)


def templates() -> list[str]:
    """Names of the templates shipped with kith."""
    root = resources.files(__package__) / "templates"
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def template_files(template: str) -> dict[str, str]:
    if template not in templates():
        raise PersonaError(f"unknown persona template {template!r}; shipped: {', '.join(templates())}")
    root = resources.files(__package__) / "templates" / template
    return {f: (root / f).read_text(encoding="utf-8") for f in PERSONA_FILES if (root / f).is_file()}


def display_name(name: str) -> str:
    """``kith`` -> ``Kith``, ``night-owl`` -> ``Night Owl``: what ``$name`` in a template becomes."""
    return " ".join(part.capitalize() for part in re.split(r"[-_]+", name) if part) or name


def exists(store: MemoryStore) -> bool:
    return store.exists("IDENTITY.md")


@dataclass(frozen=True, slots=True)
class Created:
    name: str
    root: Path
    files: tuple[str, ...]
    source: str  # "template:<t>" | "persona:<p>"


def bootstrap(
    store: MemoryStore,
    name: str,
    *,
    template: str = "default",
    source_store: MemoryStore | None = None,
    title: str | None = None,
    overwrite: bool = False,
) -> Created:
    """Write a persona's files into ``store`` from a shipped template, or copied from ``source_store``.

    Refuses to touch an existing persona unless ``overwrite``: its files are someone's edits.
    """
    check_name(name)
    if exists(store) and not overwrite:
        raise PersonaError(f"persona {name!r} already exists in {store.root} (use --force to overwrite)")
    if source_store is not None:
        files = {f: source_store.read(f) for f in PERSONA_FILES if source_store.exists(f)}
        if "IDENTITY.md" not in files:
            raise PersonaError(f"{source_store.root} is not a persona (no IDENTITY.md)")
        source = f"persona:{source_store.root.name}"
    else:
        mapping = {"name": title or display_name(name), "persona": name}
        files = {f: Template(text).safe_substitute(mapping) for f, text in template_files(template).items()}
        source = f"template:{template}"
    for fname, text in files.items():
        store.write(fname, text, source=f"persona-bootstrap:{source}")
    log.info("persona %s created in %s from %s", name, store.root, source)
    return Created(name=name, root=store.root, files=tuple(files), source=source)


def source_for(data_dir: Path, template: str, *, max_file_bytes: int = 256 * 1024) -> MemoryStore | None:
    """``template`` names a shipped template (None: use it) or an existing persona (its store)."""
    if template in templates():
        return None
    try:
        root = persona_root(data_dir, template)
    except PersonaError:
        raise PersonaError(f"unknown template {template!r}; shipped: {', '.join(templates())}") from None
    if not (root / "IDENTITY.md").is_file():
        raise PersonaError(
            f"unknown template {template!r}: neither a shipped template ({', '.join(templates())}) "
            "nor an existing persona"
        )
    return MemoryStore(root, max_file_bytes=max_file_bytes)


# ---------------------------------------------------------------------------------- in a gateway


def persona_store(gateway: Services, name: str) -> MemoryStore:
    """The guarded store of a persona's root (the memory service's, so edits are indexed)."""
    if gateway.memory is not None:
        return gateway.memory.stores.for_persona(check_name(name))
    # Not started (a CLI building a gateway only to read config): an unindexed store on the same root.
    return Stores.of(gateway.config).unwatched(persona_root(gateway.data_dir, name))


class FileCache:
    """Reads small memory files for turns; a file is re-read only when its size or mtime changed, so
    persona and digest files that did not change cost one ``stat`` per turn."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._cache: dict[tuple[str, str], tuple[int, float, str]] = {}
        self.max_entries = max_entries

    def read(self, store: MemoryStore, rel: str, *, seen: MemoryEntry | None = None) -> tuple[str, float]:
        """(text, mtime); ("", 0) when the file is missing or unreadable. ``seen``: the file's entry
        from a listing made just now (``MemoryStore.files``), which spares a second stat."""
        key = (str(store.root), rel)
        if seen is not None:
            st = seen
        else:
            try:
                st = store.stat(rel)
            except MemoryStoreError:
                self._cache.pop(key, None)
                return "", 0.0
        hit = self._cache.get(key)
        if hit is not None and hit[0] == st.size and hit[1] == st.mtime:
            return hit[2], st.mtime
        try:
            text = store.read(rel)
        except MemoryStoreError:
            return "", 0.0
        if len(self._cache) >= self.max_entries:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = (st.size, st.mtime, text)
        return text, st.mtime


WARNED: StashKey[set[str]] = StashKey()  # persona names already warned about, per gateway


def resolve(gateway: Services, name: str) -> str:
    """``name`` if that persona exists, else the configured default (a session may name a persona
    that was renamed or removed since it started)."""
    try:
        if exists(persona_store(gateway, name)):
            return name
    except (PersonaError, MemoryStoreError):
        pass
    default = gateway.config.personas.default
    warned = gateway.stash.setdefault(WARNED, set())
    if name != default and name not in warned:
        warned.add(name)  # once per name: this runs every turn of such a session
        log.warning("persona %r does not exist; using the default persona %r", name, default)
    return default


def ensure_configured(gateway: Services) -> list[Created]:
    """Create every persona the config names that does not exist yet (first start, new config)."""
    cfg = gateway.config.personas
    created = []
    source = source_for(gateway.data_dir, cfg.template, max_file_bytes=gateway.config.memory.max_file_bytes)
    for name in cfg.names():
        store = persona_store(gateway, name)
        if exists(store):
            continue
        created.append(bootstrap(store, name, template=cfg.template, source_store=source))
    return created

