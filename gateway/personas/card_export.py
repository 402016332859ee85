"""A persona back out as a Character Card (V3, V2, PNG) and its lorebooks in either format."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from gateway.personas import check_name, display_name
from gateway.personas.cards import CARD_IMAGE, CARD_JSON, LORE_DIR, V2, V3, CardError
from gateway.personas.lore import (
    BOOK_FILE,
    CHARACTER_BOOK,
    WORLD_INFO,
    parse_entry,
    to_character_book,
    to_world_info,
)
from gateway.personas.png import PngError, blank_png, with_text


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
