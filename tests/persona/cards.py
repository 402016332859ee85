"""Character cards made by the tests (no third-party card files): a V3 card with every field of the
spec's ``CharacterCardV3`` and ``Lorebook`` interfaces (https://github.com/kwaroran/character-card-spec-v3,
SPEC_V3.md; the spec repository ships no example card files, only README.md, SPEC_V3.md and concepts.md,
so its "example" is its TypeScript interface filled in), real-world-shaped variants (unicode, missing
optional fields, V2), SillyTavern World Info in the shape SillyTavern exports, and PNG wrapping."""

from __future__ import annotations

import base64
import copy
import json
import struct
import zlib
from typing import Any

from gateway.personas.png import SIGNATURE, blank_png


def v3_spec_card() -> dict[str, Any]:
    """Every field the V3 spec's interfaces name, with unknown extensions and a future top-level key."""
    return {
        "spec": "chara_card_v3", "spec_version": "3.0",
        "data": {
            "name": "Seraphina", "description": "{{char}} is a guardian of the forest. She greets {{user}} warmly.",
            "tags": ["fantasy", "guardian"], "creator": "tests", "character_version": "1.2",
            "mes_example": "<START>\n{{user}}: hi\n{{char}}: Welcome, traveller.",
            "extensions": {"talkativeness": "0.5", "fav": False, "depth_prompt": {"prompt": "x", "depth": 4},
                           "x_unknown_vendor": {"nested": [1, 2, {"deep": None}]}},
            "system_prompt": "Stay in character as {{char}}.", "post_history_instructions": "Keep replies short.",
            "first_mes": "*She looks up.* Oh, hello.", "alternate_greetings": ["Greetings.", "Ah, you again."],
            "personality": "kind, protective", "scenario": "A glade at dusk.",
            "creator_notes": "Made for tests.",
            "character_book": {
                "name": "Forest lore", "description": "about the forest", "scan_depth": 4, "token_budget": 300,
                "recursive_scanning": False, "extensions": {"vendor": {"a": 1}},
                "entries": [
                    {"keys": ["glade", "clearing"], "content": "The glade is where Seraphina heals travellers.",
                     "extensions": {"probability": 100, "useProbability": True, "selectiveLogic": 0},
                     "enabled": True, "insertion_order": 10, "case_sensitive": False, "use_regex": False,
                     "constant": False, "name": "Glade", "priority": 5, "id": 1, "comment": "the glade",
                     "selective": False, "secondary_keys": [], "position": "before_char"},
                    {"keys": [], "content": "Seraphina is bound to the forest and cannot leave it.",
                     "extensions": {}, "enabled": True, "insertion_order": 1, "use_regex": False, "constant": True,
                     "id": "two", "position": "after_char"},
                    {"keys": ["river"], "secondary_keys": ["bridge"], "selective": True,
                     "content": "The old bridge over the river is cursed.", "extensions": {"selectiveLogic": 0},
                     "enabled": True, "insertion_order": 20, "use_regex": False, "constant": False, "id": 3},
                    {"keys": ["wolf"], "content": "Wolves fear her (DISABLED-MARK).", "extensions": {},
                     "enabled": False, "insertion_order": 30, "use_regex": False, "id": 4},
                    {"keys": ["/dra(g|k)on/i"], "content": "Regex entry.", "extensions": {}, "enabled": True,
                     "insertion_order": 40, "use_regex": True, "id": 5},
                ],
            },
            "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"},
                       {"type": "x_custom", "uri": "embeded://assets/other/a.bin", "name": "a", "ext": "unknown"}],
            "nickname": "Sera", "creator_notes_multilingual": {"en": "Made for tests.", "ja": "テスト用"},
            "source": ["https://example.invalid/cards/1"], "group_only_greetings": ["Hello, everyone."],
            "creation_date": 1700000000, "modification_date": 0,
        },
        "x_future_top_level": {"kept": True},
    }


def v2_card() -> dict[str, Any]:
    card = copy.deepcopy(v3_spec_card())
    card["spec"], card["spec_version"] = "chara_card_v2", "2.0"
    for key in ("assets", "nickname", "creator_notes_multilingual", "source", "group_only_greetings",
                "creation_date", "modification_date"):
        card["data"].pop(key)
    card.pop("x_future_top_level")
    for e in card["data"]["character_book"]["entries"]:
        e.pop("use_regex", None)
    card["data"]["character_book"]["entries"].pop()  # V2 has no regex keys
    return card


def unicode_card() -> dict[str, Any]:
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": {
        "name": "Ōkami 狼 🐺", "description": "Zalgo: Z̤͔ͧ̑a̠̓l͖͌g̥o; RTL: שלום; emoji 👩‍👩‍👧; NUL-free \u2028 line sep",
        "tags": [], "creator": "", "character_version": "", "mes_example": "", "extensions": {},
        "system_prompt": "", "post_history_instructions": "", "first_mes": "やあ", "alternate_greetings": [],
        "personality": "", "scenario": "", "creator_notes": "", "group_only_greetings": []}}


def minimal_v2_card() -> dict[str, Any]:
    """Optional fields missing, as many cards in the wild are."""
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Bare", "description": "Just a name."}}


def world_info(n: int = 3) -> dict[str, Any]:
    """A SillyTavern World Info file (the shape SillyTavern exports), with fields kith does not read."""
    entries = {}
    for i in range(n):
        entries[str(i)] = {
            "uid": i, "key": [f"key{i}", f"alias{i}"], "keysecondary": [f"sec{i}"] if i == 2 else [],
            "comment": f"Entry {i}", "content": f"Lore number {i} (WI-MARK-{i}).", "constant": i == 1,
            "vectorized": False, "selective": i == 2, "selectiveLogic": 0, "addMemo": True, "order": 100 + i,
            "position": i % 2, "disable": False, "excludeRecursion": False, "preventRecursion": False,
            "delayUntilRecursion": False, "probability": 100, "useProbability": True, "depth": 4, "group": "",
            "groupOverride": False, "groupWeight": 100, "scanDepth": None, "caseSensitive": None,
            "matchWholeWords": None, "useGroupScoring": None, "automationId": "", "role": None, "sticky": 0,
            "cooldown": 0, "delay": 0, "displayIndex": i,
        }
    return {"entries": entries, "originalData": {"name": "kept as is"}}


def png_chunk(kind: bytes, body: bytes, *, crc: int | None = None) -> bytes:
    return (struct.pack(">I", len(body)) + kind + body
            + struct.pack(">I", zlib.crc32(kind + body) if crc is None else crc))


def card_png(*, ccv3: dict[str, Any] | None = None, chara: dict[str, Any] | None = None,
             image: bytes | None = None) -> bytes:
    """A PNG (``image`` or a blank 1x1) with the cards as base64 tEXt chunks before IEND."""
    base = image or blank_png()
    body = base[len(SIGNATURE):-12]  # everything but the signature and IEND
    extra = b""
    for name, card in (("chara", chara), ("ccv3", ccv3)):
        if card is not None:
            text = base64.b64encode(json.dumps(card, ensure_ascii=False).encode("utf-8"))
            extra += png_chunk(b"tEXt", name.encode() + b"\x00" + text)
    return SIGNATURE + body + extra + png_chunk(b"IEND", b"")


def image_png() -> bytes:
    """A 2x2 opaque PNG with an extra ancillary chunk, so "the original image is kept" means something."""
    ihdr = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    raw = b"".join(b"\x00" + bytes([200, 30, 30]) * 2 for _ in range(2))
    return (SIGNATURE + png_chunk(b"IHDR", ihdr) + png_chunk(b"tIME", b"\x07\xea\x0b\x18\x04\x00\x00")
            + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))
