"""Character Cards (V3, and V2) in and out of a persona, and lorebooks in and out of its ``lore/``.

Spec: https://github.com/kwaroran/character-card-spec-v3 (V3; PNG ``tEXt`` chunk ``ccv3``, V2 in
``chara``, both base64 of UTF-8 JSON; ``ccv3`` wins when both are there) and Character Card V2.

This module is the format: parsing and checking cards (``parse_card``, ``check_card``, ``check_book``);
``card_import`` writes a persona from one, ``card_export`` turns a persona back into one.

Import (``card_import.import_card``): the card is parsed and checked completely first (spec, sizes, entry count),
then the persona is written into a fresh directory next to ``personas/`` and renamed into place, so a
refused or interrupted import leaves nothing half-written, and an existing persona is replaced (only
with ``overwrite``) by one rename. What the persona holds:

* ``IDENTITY.md``, ``SOUL.md``, ``PROTOCOLS.md`` written from the card's fields (kith's own protocols
  first), ``CONTEXT_TIERS.md`` and ``HELP.md`` from the default template;
* ``card/card.json``: the card exactly as imported (every field, unknown ones too) except its lorebook;
* ``card/original.png``: the original image, byte for byte, when the card came as a PNG;
* ``lore/card/``: the card's lorebook, one file per entry (``gateway.personas.lore``).

Export (``card_export.export_card``) rebuilds the card from ``card/card.json`` plus the lorebook as ``lore/card/``
holds it now, as V3 or V2 JSON or as a PNG (the original image, or a blank one) carrying both chunks.
A card exported to the format it came in equals the imported card.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from gateway.personas.lore import CHARACTER_BOOK, LoreError, book_entries
from gateway.personas.png import PngError, text_chunks

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


DEFAULT_LIMITS = Limits()
# Nesting levels of a card or lorebook's JSON. Real ones are a handful deep; a deeper file only serves
# to exhaust the stack of whatever walks it next (the parser itself raised RecursionError, a traceback).
MAX_DEPTH = 64


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


def load_json(text: str, what: str) -> Any:
    """``json.loads``, with nesting past ``MAX_DEPTH`` refused as a ``CardError`` (before anything
    recursive walks it); a malformed document still raises ``ValueError``."""
    too_deep = CardError(f"{what} is nested more than {MAX_DEPTH} levels deep")
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise too_deep
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return value


def _decode_chunk(name: str, text: str) -> Any:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise CardError(f"the PNG's {name!r} chunk is not valid base64") from None
    try:
        return load_json(raw.decode("utf-8"), f"the PNG's {name!r} chunk")
    except CardError:
        raise
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


def parse_card(data: bytes, limits: Limits = DEFAULT_LIMITS) -> Parsed:
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
            card = load_json(data.decode("utf-8-sig"), "the card")
        except CardError:
            raise
        except UnicodeDecodeError:
            raise CardError("the file is neither a PNG nor UTF-8 JSON") from None
        except ValueError as exc:
            raise CardError(f"the file is not valid JSON: {exc}") from None
    return Parsed(card=card, image=image, warnings=check_card(card, limits))


# -------------------------------------------------------------------------------- persona files
