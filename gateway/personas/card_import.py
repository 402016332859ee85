"""Writing a persona from a parsed Character Card, and a lorebook into a persona's ``lore/<book>/``.

Everything is built in a hidden directory beside the target and renamed into place (``install``): a
refused or interrupted import leaves the old persona or book (or nothing), never a mix.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from gateway.memory.files.store import MemoryStore
from gateway.personas import PERSONA_FILES, check_name, display_name, template_files
from gateway.personas.cards import (
    CARD_IMAGE,
    CARD_JSON,
    DEFAULT_LIMITS,
    LORE_DIR,
    SOURCE,
    CardError,
    Limits,
    check_book,
    load_json,
    parse_card,
)
from gateway.personas.lore import BOOK_FILE, CHARACTER_BOOK, LoreError, detect, render_entry, slug


def _fill(text: str, char: str) -> str:
    for token in ("{{char}}", "{{Char}}", "{{CHAR}}", "<BOT>", "<bot>", "<char>"):
        text = text.replace(token, char)
    for token in ("{{user}}", "{{User}}", "{{USER}}", "<USER>", "<user>"):
        text = text.replace(token, "the person you talk to")
    return text.strip()


def _section(title: str, text: str) -> str:
    return f"## {title}\n\n{text}\n\n" if text.strip() else ""


def persona_files(name: str, data: dict[str, Any]) -> dict[str, str]:
    """IDENTITY, SOUL, PROTOCOLS from a card's fields; CONTEXT_TIERS and HELP from the default template."""
    char = (data.get("nickname") or data.get("name") or display_name(name)).strip()
    template = {f: Template(t).safe_substitute({"name": char, "persona": name})
                for f, t in template_files("default").items()}  # fmt: skip

    def field_(key: str) -> str:
        value = data.get(key)
        return _fill(value, char) if isinstance(value, str) else ""

    identity = f"# Identity\n\nYou are {char}.\n\n" + (field_("description") + "\n" if field_("description") else "")
    soul = "# Soul\n\n" + _section("Personality", field_("personality")) + _section("Scenario", field_("scenario"))
    soul += _section("Example messages", field_("mes_example")) + _section("Greeting", field_("first_mes"))
    protocols = template.get("PROTOCOLS.md", "# Protocols\n").rstrip() + "\n\n"
    card_rules = field_("system_prompt") + ("\n\n" + field_("post_history_instructions")
                                            if field_("post_history_instructions") else "")  # fmt: skip
    protocols += _section("From the character card", card_rules.strip())
    files = {"IDENTITY.md": identity, "SOUL.md": soul.rstrip() + "\n", "PROTOCOLS.md": protocols.rstrip() + "\n"}
    for extra in ("CONTEXT_TIERS.md", "HELP.md"):
        if extra in template:
            files[extra] = template[extra]
    return files


def lore_files(fmt: str, book: dict[str, Any], entries: list[dict[str, Any]], prefix: str) -> dict[str, str]:
    """``lore/<book>/`` as {relative path: text}: one file per entry and ``_book.json`` (the book's own
    fields and the entries' order)."""
    files: dict[str, str] = {}
    order = []
    width = max(4, len(str(len(entries))))
    for i, entry in enumerate(entries):
        title = str(entry.get("name") or entry.get("comment") or "")
        keys = entry.get("keys") if fmt == CHARACTER_BOOK else entry.get("key")
        if not title and isinstance(keys, list) and keys:
            title = str(keys[0])
        fname = f"{i + 1:0{width}d}-{slug(title)}.md"
        files[f"{prefix}/{fname}"] = render_entry(fmt, entry)
        order.append(fname)
    meta = {k: v for k, v in book.items() if k != "entries"}
    files[f"{prefix}/{BOOK_FILE}"] = json.dumps({"v": 1, "format": fmt, "book": meta, "order": order},
                                                ensure_ascii=False, indent=1) + "\n"  # fmt: skip
    return files


def _write_tree(root: Path, files: dict[str, str], binary: dict[str, bytes], *, max_file_bytes: int,
                source: str) -> None:  # fmt: skip
    store = MemoryStore(root, max_file_bytes=max_file_bytes)
    for rel, text in files.items():
        store.write(rel, text, source=source)
    for rel, blob in binary.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


STALE_S = 3600


def _remove_stale(parent: Path) -> None:
    """Leftovers of an import killed mid-way (a crash, SIGKILL): a replaced persona whose successor never
    arrived is put back; temporary directories go once they are an hour old."""
    now = time.time()
    for p in parent.iterdir():
        if not p.name.startswith(".") or not p.is_dir() or p.is_symlink():
            continue
        if ".old-" in p.name:
            original = parent / p.name[1:].rsplit(".old-", 1)[0]
            if not original.exists():
                os.rename(p, original)
                continue
        if (".import-" in p.name or ".old-" in p.name) and now - p.stat().st_mtime > STALE_S:
            shutil.rmtree(p, ignore_errors=True)


def install(target: Path, build: Any, *, overwrite: bool) -> None:
    """Run ``build(tmp_root)`` in a fresh directory beside ``target`` and rename it into place; any
    failure removes the temporary directory and leaves ``target`` as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target.parent)
    if target.exists() and not overwrite:
        raise CardError(f"persona {target.name!r} already exists (use --force to replace it)")
    tmp = target.parent / f".{target.name}.import-{uuid.uuid4().hex[:8]}"
    old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        build(tmp)
        _fsync_dir(tmp)
        if target.exists():
            os.rename(target, old)
        os.rename(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not target.exists():
            os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class Imported:
    name: str
    root: Path
    spec: str
    entries: int
    image: bool
    warnings: tuple[str, ...]


def import_card(data_dir: Path, name: str | None, blob: bytes, *, limits: Limits = DEFAULT_LIMITS,
                overwrite: bool = False, max_file_bytes: int = 256 * 1024) -> Imported:  # fmt: skip
    """Parse ``blob`` (PNG or JSON) and write persona ``name`` (default: from the card's name)."""
    parsed = parse_card(blob, limits)
    name = check_name(name or slug(parsed.data["name"], 64, default="character"))
    target = Path(data_dir) / "personas" / name
    card = json.loads(json.dumps(parsed.card))  # a private copy
    book = card["data"].pop("character_book", None)
    stored = {"v": 1, "had_book": book is not None, "card": card}
    files = persona_files(name, parsed.data)
    entries: list[dict[str, Any]] = []
    if book is not None:
        entries = check_book(CHARACTER_BOOK, book, limits)
        files.update(lore_files(CHARACTER_BOOK, book, entries, f"{LORE_DIR}/card"))
    files[CARD_JSON] = json.dumps(stored, ensure_ascii=False, indent=1) + "\n"
    binary = {CARD_IMAGE: parsed.image} if parsed.image is not None else {}
    cap = max(max_file_bytes, len(files[CARD_JSON].encode("utf-8")) + 1)

    def build(root: Path) -> None:
        persona_cap = {f: t for f, t in files.items() if f in PERSONA_FILES}
        for f, t in persona_cap.items():
            if len(t.encode("utf-8")) > max_file_bytes:
                raise CardError(f"{f} would be {len(t.encode('utf-8')):,} bytes; persona files are capped at "
                                f"{max_file_bytes:,} (memory.max_file_bytes)")  # fmt: skip
        _write_tree(root, files, binary, max_file_bytes=cap, source=f"{SOURCE}:card")

    install(target, build, overwrite=overwrite)
    return Imported(name=name, root=target, spec=parsed.spec, entries=len(entries), image=parsed.image is not None,
                    warnings=tuple(parsed.warnings))


def import_lorebook(data_dir: Path, persona: str, book_name: str, blob: bytes, *, limits: Limits = DEFAULT_LIMITS,
                    overwrite: bool = False) -> tuple[str, int]:  # fmt: skip
    """A lorebook file (Character Card lorebook, ``lorebook_v3`` or SillyTavern World Info) into
    ``personas/<persona>/lore/<book_name>/``. Returns (format, entries)."""
    root = Path(data_dir) / "personas" / check_name(persona)
    if not (root / "IDENTITY.md").is_file():
        raise CardError(f"persona {persona!r} does not exist (kith persona new or import a card first)")
    if len(blob) > limits.max_file_bytes:
        raise CardError(f"the file is {len(blob):,} bytes; the limit is {limits.max_file_bytes:,}")
    try:
        obj = load_json(blob.decode("utf-8-sig"), "the lorebook")
    except CardError:
        raise
    except (UnicodeDecodeError, ValueError) as exc:
        raise CardError(f"the lorebook is not valid UTF-8 JSON: {exc}") from None
    try:
        fmt, book, wrapped = detect(obj)
    except LoreError as exc:
        raise CardError(str(exc)) from None
    entries = check_book(fmt, book, limits)
    book_slug = check_name(slug(book_name, 64))
    files = lore_files(fmt, book, entries, ".")
    if wrapped:
        meta = json.loads(files[f"./{BOOK_FILE}"])
        meta["wrapper"] = {k: v for k, v in obj.items() if k != "data"}
        files[f"./{BOOK_FILE}"] = json.dumps(meta, ensure_ascii=False, indent=1) + "\n"
    files = {rel[2:]: text for rel, text in files.items()}
    target = root / LORE_DIR / book_slug
    install(target, lambda tmp: _write_tree(tmp, files, {}, max_file_bytes=max(256 * 1024, limits.max_field_bytes * 2),
                                            source=f"{SOURCE}:lore"), overwrite=overwrite)  # fmt: skip
    return fmt, len(entries)


# ------------------------------------------------------------------------------------- export
