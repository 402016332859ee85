"""Character Cards (V3, and V2) in and out of a persona, and lorebooks in and out of its ``lore/``.

Spec: https://github.com/kwaroran/character-card-spec-v3 (V3; PNG ``tEXt`` chunk ``ccv3``, V2 in
``chara``, both base64 of UTF-8 JSON; ``ccv3`` wins when both are there) and Character Card V2.

Import (``import_card``): the card is parsed and checked completely first (spec, sizes, entry count),
then the persona is written into a fresh directory next to ``personas/`` and renamed into place, so a
refused or interrupted import leaves nothing half-written, and an existing persona is replaced (only
with ``overwrite``) by one rename. What the persona holds:

* ``IDENTITY.md``, ``SOUL.md``, ``PROTOCOLS.md`` written from the card's fields (kith's own protocols
  first), ``CONTEXT_TIERS.md`` and ``HELP.md`` from the default template;
* ``card/card.json``: the card exactly as imported (every field, unknown ones too) except its lorebook;
* ``card/original.png``: the original image, byte for byte, when the card came as a PNG;
* ``lore/card/``: the card's lorebook, one file per entry (``gateway.personas.lore``).

Export (``export_card``) rebuilds the card from ``card/card.json`` plus the lorebook as ``lore/card/``
holds it now, as V3 or V2 JSON or as a PNG (the original image, or a blank one) carrying both chunks.
A card exported to the format it came in equals the imported card.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from gateway.memory.files.store import MemoryStore
from gateway.personas import PERSONA_FILES, check_name, display_name, template_files
from gateway.personas.lore import (
    BOOK_FILE,
    CHARACTER_BOOK,
    WORLD_INFO,
    LoreError,
    book_entries,
    detect,
    parse_entry,
    render_entry,
    slug,
    to_character_book,
    to_world_info,
)
from gateway.personas.png import PngError, blank_png, text_chunks, with_text

V3, V2 = "chara_card_v3", "chara_card_v2"
CARD_DIR, CARD_JSON, CARD_IMAGE = "card", "card/card.json", "card/original.png"
LORE_DIR = "lore"
SOURCE = "persona-import"


class CardError(ValueError):
    """A card or lorebook that cannot be imported or exported; the message says why."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_file_bytes: int = 32 * 1024 * 1024  # a card file (PNG images can be large)
    max_field_bytes: int = 256 * 1024  # any one string in the card (persona files share the store's cap)
    max_entries: int = 1000  # lorebook entries per import


@dataclass(slots=True)
class Parsed:
    card: dict[str, Any]
    image: bytes | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def spec(self) -> str:
        return str(self.card["spec"])

    @property
    def data(self) -> dict[str, Any]:
        return self.card["data"]  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------- parsing


def _decode_chunk(name: str, text: str) -> Any:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise CardError(f"the PNG's {name!r} chunk is not valid base64") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CardError(f"the PNG's {name!r} chunk is not UTF-8 text") from None
    except ValueError as exc:
        raise CardError(f"the PNG's {name!r} chunk is not valid JSON: {exc}") from None


def _check_sizes(obj: Any, path: str, limit: int) -> None:
    stack = [(obj, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            try:
                size = len(value.encode("utf-8"))
            except UnicodeEncodeError:
                raise CardError(f"field {where} is not valid Unicode text (a lone surrogate)") from None
            if size > limit:
                raise CardError(f"field {where} is {size:,} bytes; the limit is {limit:,}")
        elif isinstance(value, dict):
            stack.extend((v, f"{where}.{k}") for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))


_STRING_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example", "creator_notes",
                  "system_prompt", "post_history_instructions", "creator", "character_version", "nickname")
_LIST_FIELDS = ("alternate_greetings", "tags", "group_only_greetings", "source")


def check_card(card: Any, limits: Limits) -> list[str]:
    """Raise ``CardError`` unless ``card`` is a V2 or V3 card kith can import; the warnings otherwise."""
    warnings: list[str] = []
    if not isinstance(card, dict):
        raise CardError("a character card must be a JSON object")
    spec = card.get("spec")
    if spec not in (V3, V2):
        if "spec" not in card and "name" in card and "description" in card:
            raise CardError("this is a Character Card V1 (no 'spec'); kith imports V2 and V3 cards")
        raise CardError(f"unsupported card spec {spec!r}: kith imports '{V3}' and '{V2}'")
    version = card.get("spec_version")
    try:
        number = float(version)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise CardError(f"spec_version {version!r} is not a version number") from None
    if spec == V3 and number >= 4:
        raise CardError(f"spec_version {version} is a future major version of {V3}; kith reads 3.x")
    if spec == V3 and number > 3.0:
        warnings.append(f"the card was made with {V3} {version}, newer than kith's 3.0: fields kith does not "
                        "know are kept and exported unchanged")  # fmt: skip
    if spec == V2 and number != 2.0:
        raise CardError(f"{V2} with spec_version {version!r}: kith reads 2.0")
    data = card.get("data")
    if not isinstance(data, dict):
        raise CardError("the card has no 'data' object")
    if not isinstance(data.get("name"), str) or not data["name"].strip():
        raise CardError("the card has no name (data.name)")
    for name in _STRING_FIELDS:
        if name in data and data[name] is not None and not isinstance(data[name], str):
            raise CardError(f"data.{name} must be a string")
    for name in _LIST_FIELDS:
        if name in data and data[name] is not None and not (
                isinstance(data[name], list) and all(isinstance(x, str) for x in data[name])):
            raise CardError(f"data.{name} must be a list of strings")
    _check_sizes(card, "card", limits.max_field_bytes)
    book = data.get("character_book")
    if book is not None:
        if not isinstance(book, dict):
            raise CardError("data.character_book must be an object")
        check_book(CHARACTER_BOOK, book, limits)
    return warnings


def check_book(fmt: str, book: dict[str, Any], limits: Limits) -> list[dict[str, Any]]:
    try:
        entries = book_entries(fmt, book)
    except LoreError as exc:
        raise CardError(str(exc)) from None
    if len(entries) > limits.max_entries:
        raise CardError(f"the lorebook has {len(entries):,} entries; the limit is {limits.max_entries:,} "
                        "(--max-entries raises it)")  # fmt: skip
    _check_sizes(book, "lorebook", limits.max_field_bytes)
    for i, e in enumerate(entries):
        content = e.get("content", "")
        if not isinstance(content, str):
            raise CardError(f"lorebook entry {i}: content must be a string")
    return entries


def parse_card(data: bytes, limits: Limits = Limits()) -> Parsed:
    """A card from a PNG (``ccv3``, else ``chara``) or a JSON file's bytes."""
    if len(data) > limits.max_file_bytes:
        raise CardError(f"the file is {len(data):,} bytes; the limit is {limits.max_file_bytes:,}")
    image: bytes | None = None
    if data.startswith(b"\x89PNG"):
        try:
            texts = text_chunks(data)
        except PngError as exc:
            raise CardError(str(exc)) from None
        name = "ccv3" if "ccv3" in texts else "chara" if "chara" in texts else None
        if name is None:
            raise CardError("the PNG carries no character card (no 'ccv3' or 'chara' tEXt chunk)")
        card = _decode_chunk(name, texts[name])
        image = data
    else:
        try:
            card = json.loads(data.decode("utf-8-sig"))
        except UnicodeDecodeError:
            raise CardError("the file is neither a PNG nor UTF-8 JSON") from None
        except ValueError as exc:
            raise CardError(f"the file is not valid JSON: {exc}") from None
    return Parsed(card=card, image=image, warnings=check_card(card, limits))


# -------------------------------------------------------------------------------- persona files


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


def install(target: Path, build: Any, *, overwrite: bool) -> None:
    """Run ``build(tmp_root)`` in a fresh directory beside ``target`` and rename it into place; any
    failure removes the temporary directory and leaves ``target`` as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
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


def import_card(data_dir: Path, name: str | None, blob: bytes, *, limits: Limits = Limits(),
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


def import_lorebook(data_dir: Path, persona: str, book_name: str, blob: bytes, *, limits: Limits = Limits(),
                    overwrite: bool = False) -> tuple[str, int]:  # fmt: skip
    """A lorebook file (Character Card lorebook, ``lorebook_v3`` or SillyTavern World Info) into
    ``personas/<persona>/lore/<book_name>/``. Returns (format, entries)."""
    root = Path(data_dir) / "personas" / check_name(persona)
    if not (root / "IDENTITY.md").is_file():
        raise CardError(f"persona {persona!r} does not exist (kith persona new or import a card first)")
    if len(blob) > limits.max_file_bytes:
        raise CardError(f"the file is {len(blob):,} bytes; the limit is {limits.max_file_bytes:,}")
    try:
        obj = json.loads(blob.decode("utf-8-sig"))
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


def read_book(book_dir: Path) -> tuple[str, dict[str, Any], list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """(format, book fields, [(entry format, entry)], _book.json) of ``lore/<book>/`` as it is now:
    entries in their imported order, then files added since (by name); files without a marker are
    exported as plain entries without keys."""
    meta: dict[str, Any] = {"format": CHARACTER_BOOK, "book": {}, "order": []}
    meta_path = book_dir / BOOK_FILE
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    fmt = str(meta.get("format", CHARACTER_BOOK))
    present = sorted(p.name for p in book_dir.glob("*.md") if p.is_file() and not p.is_symlink())
    known = [n for n in meta.get("order", []) if n in present]
    ordered = known + [n for n in present if n not in known]
    entries = []
    for fname in ordered:
        text = (book_dir / fname).read_text(encoding="utf-8")
        parsed = parse_entry(text)
        if parsed is None:
            body = text.strip()
            title = body.partition("\n")[0].lstrip("# ").strip() if body.startswith("# ") else fname[:-3]
            parsed = (CHARACTER_BOOK, {"keys": [], "content": body, "extensions": {}, "enabled": True,
                                       "insertion_order": 100, "use_regex": False, "comment": title})
        entries.append(parsed)
    return fmt, dict(meta.get("book") or {}), entries, meta


def build_book(fmt_out: str, book_dir: Path) -> dict[str, Any]:
    """The lorebook of ``book_dir`` as a Character Card lorebook or as SillyTavern World Info."""
    fmt, book, entries, _ = read_book(book_dir)
    if fmt_out == WORLD_INFO:
        out = dict(book) if fmt == WORLD_INFO else {k: v for k, v in book.items() if k in ("name", "description")}
        converted = [to_world_info(f, e, i) for i, (f, e) in enumerate(entries)]
        out["entries"] = {str(e.get("uid", i)) if fmt == WORLD_INFO else str(i): e for i, e in enumerate(converted)}
        return out
    out = dict(book) if fmt == CHARACTER_BOOK else {"extensions": {}}
    if fmt != CHARACTER_BOOK:
        out.update({k: v for k, v in book.items() if k in ("name", "description")})
    out["entries"] = [to_character_book(f, e, i) for i, (f, e) in enumerate(entries)]
    return out


def export_lorebook(data_dir: Path, persona: str, book_name: str, fmt: str) -> dict[str, Any]:
    """``fmt``: ``lorebook_v3`` (``{"spec": "lorebook_v3", "data": ...}``), ``character_book`` (the bare
    object) or ``st-world-info``."""
    book_dir = Path(data_dir) / "personas" / check_name(persona) / LORE_DIR / book_name
    if not book_dir.is_dir():
        raise CardError(f"persona {persona!r} has no lorebook {book_name!r}")
    if fmt == WORLD_INFO:
        return build_book(WORLD_INFO, book_dir)
    data = build_book(CHARACTER_BOOK, book_dir)
    if fmt == CHARACTER_BOOK:
        return data
    _, _, _, meta = read_book(book_dir)
    wrapper = meta.get("wrapper") if isinstance(meta.get("wrapper"), dict) else {"spec": "lorebook_v3"}
    return {**wrapper, "data": data}


def card_of(data_dir: Path, persona: str, spec: str) -> dict[str, Any]:
    """Persona ``persona`` as a card object of ``spec`` (V3 or V2)."""
    root = Path(data_dir) / "personas" / check_name(persona)
    if not (root / "IDENTITY.md").is_file():
        raise CardError(f"persona {persona!r} does not exist")
    stored_path = root / CARD_JSON
    if stored_path.is_file():
        stored = json.loads(stored_path.read_text(encoding="utf-8"))
        card = stored["card"]
        had_book = bool(stored.get("had_book"))
    else:  # a persona made in kith: its files become the card's text
        def text(f: str) -> str:
            p = root / f
            return p.read_text(encoding="utf-8").strip() if p.is_file() else ""
        card = {"spec": V3, "spec_version": "3.0", "data": {
            "name": display_name(persona), "description": text("IDENTITY.md"), "personality": text("SOUL.md"),
            "scenario": "", "first_mes": "", "mes_example": "", "creator_notes": "",
            "system_prompt": text("PROTOCOLS.md"), "post_history_instructions": "", "alternate_greetings": [],
            "tags": [], "creator": "",
            "character_version": "", "extensions": {}, "group_only_greetings": []}}
        had_book = False
    book_dir = root / LORE_DIR / "card"
    data = dict(card["data"])
    if book_dir.is_dir() or had_book:
        data["character_book"] = build_book(CHARACTER_BOOK, book_dir) if book_dir.is_dir() else {"entries": []}
    if spec == card["spec"]:
        return {**card, "data": data}
    if spec == V3:  # a V2 card exported as V3: V3's required fields added
        data.setdefault("group_only_greetings", [])
        if "character_book" in data:
            for e in data["character_book"].get("entries", []):
                e.setdefault("use_regex", False)
        return {**{k: v for k, v in card.items() if k not in ("spec", "spec_version")}, "spec": V3,
                "spec_version": "3.0", "data": data}  # fmt: skip
    return {**{k: v for k, v in card.items() if k not in ("spec", "spec_version")}, "spec": V2, "spec_version": "2.0",
            "data": data}  # fmt: skip


def _b64(obj: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(obj, ensure_ascii=False).encode("utf-8")).decode("ascii")


def export_card(data_dir: Path, persona: str, fmt: str) -> bytes:
    """``fmt``: ``v3`` or ``v2`` (JSON) or ``png`` (the original image, or a blank one, with a ``ccv3``
    chunk and a V2 ``chara`` chunk for older readers)."""
    if fmt == "v3":
        return json.dumps(card_of(data_dir, persona, V3), ensure_ascii=False, indent=2).encode("utf-8")
    if fmt == "v2":
        return json.dumps(card_of(data_dir, persona, V2), ensure_ascii=False, indent=2).encode("utf-8")
    if fmt != "png":
        raise CardError(f"unknown card format {fmt!r} (v3, v2, png)")
    image_path = Path(data_dir) / "personas" / check_name(persona) / CARD_IMAGE
    image = image_path.read_bytes() if image_path.is_file() else blank_png()
    try:
        return with_text(image, {"chara": _b64(card_of(data_dir, persona, V2)),
                                 "ccv3": _b64(card_of(data_dir, persona, V3))})  # fmt: skip
    except PngError as exc:
        raise CardError(f"the stored image is damaged: {exc}") from None

