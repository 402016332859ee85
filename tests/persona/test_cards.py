"""Character Card V3/V2 and lorebook import and export: lossless round trips, the original image kept,
bad input refused with a clear error and nothing half-written."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gateway.personas.card_export import export_card, export_lorebook
from gateway.personas.card_import import import_card, import_lorebook
from gateway.personas.cards import CardError, Limits
from gateway.personas.lore import parse_entry, rule_of
from gateway.personas.png import SIGNATURE, text_chunks
from tests.persona.cards import (
    card_png,
    image_png,
    minimal_v2_card,
    png_chunk,
    unicode_card,
    v2_card,
    v3_spec_card,
    world_info,
)


def _json(card: dict[str, Any]) -> bytes:
    return json.dumps(card, ensure_ascii=False).encode("utf-8")


def _chunk_card(png: bytes, name: str) -> dict[str, Any]:
    return json.loads(base64.b64decode(text_chunks(png)[name]).decode("utf-8"))  # type: ignore[no-any-return]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("make", [v3_spec_card, unicode_card], ids=["v3-spec", "unicode"])
def test_v3_json_and_png_round_trips_keep_every_field(tmp_path: Path, make: Any) -> None:
    card = make()
    got = import_card(tmp_path, "sera", _json(card))
    assert got.spec == "chara_card_v3"
    assert json.loads(export_card(tmp_path, "sera", "v3")) == card
    # Through a PNG and back in again: still the same card.
    png = export_card(tmp_path, "sera", "png")
    assert _chunk_card(png, "ccv3") == card
    import_card(tmp_path, "again", png)
    assert json.loads(export_card(tmp_path, "again", "v3")) == card


def test_v2_cards_round_trip_and_convert(tmp_path: Path) -> None:
    for i, card in enumerate((v2_card(), minimal_v2_card())):
        name = f"v2-{i}"
        import_card(tmp_path, name, _json(card))
        assert json.loads(export_card(tmp_path, name, "v2")) == card
        v3 = json.loads(export_card(tmp_path, name, "v3"))
        assert v3["spec"] == "chara_card_v3" and v3["spec_version"] == "3.0"
        assert v3["data"]["group_only_greetings"] == [], "V3's required field is added"
        assert {k: v for k, v in v3["data"].items() if k not in ("group_only_greetings", "character_book")} == {
            k: v for k, v in card["data"].items() if k != "character_book"}


def test_png_import_keeps_the_original_image_and_prefers_ccv3(tmp_path: Path) -> None:
    image = image_png()
    v3 = v3_spec_card()
    v2 = copy.deepcopy(v2_card())
    v2["data"]["name"] = "Backfilled V2"
    png = card_png(ccv3=v3, chara=v2, image=image)
    got = import_card(tmp_path, None, png)
    assert got.name == "seraphina" and got.image and got.entries == 5
    root = tmp_path / "personas" / "seraphina"
    assert (root / "card" / "original.png").read_bytes() == png, "the original file, byte for byte"
    out = export_card(tmp_path, "seraphina", "png")
    assert _chunk_card(out, "ccv3") == v3
    assert _chunk_card(out, "chara")["spec"] == "chara_card_v2", "a V2 chunk for older readers"
    assert b"tIME" in out and out.count(b"IDAT") == 1, "the image's own chunks are kept"
    identity = (root / "IDENTITY.md").read_text()
    assert "You are Sera." in identity and "guardian of the forest" in identity and "{{char}}" not in identity
    assert "Stay in character as Sera." in (root / "PROTOCOLS.md").read_text()
    # A V2-only PNG imports from its chara chunk.
    got = import_card(tmp_path, "old", card_png(chara=v2_card()))
    assert got.spec == "chara_card_v2"


def test_lore_files_are_readable_and_edits_are_exported(tmp_path: Path) -> None:
    import_card(tmp_path, "sera", _json(v3_spec_card()))
    lore = tmp_path / "personas" / "sera" / "lore" / "card"
    files = sorted(p.name for p in lore.glob("*.md"))
    assert files[0] == "0001-glade.md" and len(files) == 5
    text = (lore / "0001-glade.md").read_text()
    assert text.startswith("# Glade\n\n- keys: glade, clearing") and text.endswith(
        "The glade is where Seraphina heals travellers.")
    (lore / "0001-glade.md").write_text(text.replace("heals travellers", "heals EDITED travellers"))
    out = json.loads(export_card(tmp_path, "sera", "v3"))
    assert out["data"]["character_book"]["entries"][0]["content"].endswith("heals EDITED travellers.")
    # A hand-written file joins the book as an entry without keys.
    (lore / "9999-notes.md").write_text("# Notes\n\nThe forest is old.")
    entries = json.loads(export_card(tmp_path, "sera", "v3"))["data"]["character_book"]["entries"]
    assert entries[-1]["keys"] == [] and "The forest is old." in entries[-1]["content"]


def test_world_info_round_trip_and_conversion(tmp_path: Path) -> None:
    import_card(tmp_path, "sera", _json(minimal_v2_card()))
    wi = world_info(3)
    fmt, n = import_lorebook(tmp_path, "sera", "world", _json(wi))
    assert (fmt, n) == ("st-world-info", 3)
    assert export_lorebook(tmp_path, "sera", "world", "st-world-info") == wi
    as_book = export_lorebook(tmp_path, "sera", "world", "lorebook_v3")
    assert as_book["spec"] == "lorebook_v3"
    entries = as_book["data"]["entries"]
    assert [e["keys"] for e in entries] == [["key0", "alias0"], ["key1", "alias1"], ["key2", "alias2"]]
    assert [e["insertion_order"] for e in entries] == [100, 101, 102]
    assert entries[1]["constant"] and entries[2]["selective"] and entries[2]["secondary_keys"] == ["sec2"]
    assert [e["position"] for e in entries] == ["before_char", "after_char", "before_char"]
    # ... and that lorebook_v3 file imports and exports unchanged.
    import_lorebook(tmp_path, "sera", "book2", _json(as_book))
    assert export_lorebook(tmp_path, "sera", "book2", "lorebook_v3") == as_book
    # The card's own book exported as World Info carries the ST fields.
    import_card(tmp_path, "full", _json(v3_spec_card()))
    st = export_lorebook(tmp_path, "full", "card", "st-world-info")
    first = st["entries"]["0"]
    assert first["key"] == ["glade", "clearing"] and first["order"] == 10 and first["disable"] is False


def test_entry_marker_survives_hostile_content(tmp_path: Path) -> None:
    card = v3_spec_card()
    hostile = "line\n<!-- kith:lore {\"v\":1} -->\n--> end\n\n\n"
    card["data"]["character_book"]["entries"][0]["content"] = hostile
    card["data"]["character_book"]["entries"][0]["comment"] = "a --> b"
    import_card(tmp_path, "h", _json(card))
    assert json.loads(export_card(tmp_path, "h", "v3")) == card
    text = next((tmp_path / "personas" / "h" / "lore" / "card").glob("0001-*.md")).read_text()
    parsed = parse_entry(text)
    assert parsed is not None and parsed[1]["content"] == hostile
    assert rule_of(*parsed).keys == ("glade", "clearing")


# ------------------------------------------------------------------------------------ bad input


def _nothing_written(tmp_path: Path) -> None:
    base = tmp_path / "personas"
    assert not base.exists() or list(base.iterdir()) == [], "nothing half-written"


def _corrupt(png: bytes, what: str) -> bytes:
    body = image_png()[len(SIGNATURE):]
    if what == "crc":
        i = png.index(b"tEXt")
        return png[:i + 6] + bytes([png[i + 6] ^ 1]) + png[i + 7:]
    if what == "length":
        i = png.index(b"tEXt") - 4
        return png[:i] + b"\x7f\xff\xff\xff" + png[i + 4:]
    if what == "truncated":
        return png[:-12]  # no IEND
    if what == "signature":
        return b"\x89PNX" + png[4:]
    if what == "type":
        i = png.index(b"tEXt")
        return png[:i] + b"t3Xt" + png[i + 4:]
    if what == "base64":
        return SIGNATURE + body[:-12] + png_chunk(b"tEXt", b"ccv3\x00!!!not base64!!!") + png_chunk(b"IEND", b"")
    if what == "json":
        bad = base64.b64encode(b"{not json")
        return SIGNATURE + body[:-12] + png_chunk(b"tEXt", b"ccv3\x00" + bad) + png_chunk(b"IEND", b"")
    if what == "nocard":
        return image_png()
    raise AssertionError(what)


@pytest.mark.parametrize("what,message", [
    ("crc", "CRC mismatch"), ("length", "more than the file holds"), ("truncated", "truncated PNG"),
    ("signature", "neither a PNG nor UTF-8 JSON"), ("type", "not four ASCII letters"),
    ("base64", "not valid base64"), ("json", "not valid JSON"), ("nocard", "no 'ccv3' or 'chara'"),
])
def test_malformed_png_chunks_give_clear_errors(tmp_path: Path, what: str, message: str) -> None:
    png = _corrupt(card_png(ccv3=v3_spec_card()), what)
    with pytest.raises(CardError, match=message):
        import_card(tmp_path, "bad", png)
    _nothing_written(tmp_path)


@pytest.mark.parametrize("mutate,message", [
    (lambda c: c.update(spec="chara_card_v4"), "unsupported card spec 'chara_card_v4'"),
    (lambda c: c.update(spec_version="4.0"), "future major version"),
    (lambda c: c.update(spec_version="three"), "not a version number"),
    (lambda c: c.update(spec="chara_card_v2", spec_version="1.0"), "kith reads 2.0"),
    (lambda c: c.pop("spec") and c.update(name="x", description="y"), "Character Card V1"),
    (lambda c: c["data"].update(name=""), "no name"),
    (lambda c: c["data"].update(tags="not a list"), "data.tags must be a list of strings"),
    (lambda c: c["data"].update(description="\ud800"), "not valid Unicode"),
])
def test_wrong_specs_and_shapes_are_refused(tmp_path: Path, mutate: Any, message: str) -> None:
    card = v3_spec_card()
    mutate(card)
    with pytest.raises(CardError, match=message):
        import_card(tmp_path, "bad", json.dumps(card).encode())
    _nothing_written(tmp_path)


def test_a_newer_minor_version_imports_with_a_warning(tmp_path: Path) -> None:
    card = v3_spec_card()
    card["spec_version"] = "3.1"
    got = import_card(tmp_path, "newer", _json(card))
    assert got.warnings and "newer than kith's 3.0" in got.warnings[0]
    assert json.loads(export_card(tmp_path, "newer", "v3")) == card


def test_ten_megabyte_fields_are_refused(tmp_path: Path) -> None:
    for where in ("description", "extensions"):
        card = v3_spec_card()
        big = "x" * (10 * 1024 * 1024)
        if where == "extensions":
            card["data"]["extensions"]["blob"] = big
        else:
            card["data"]["description"] = big
        with pytest.raises(CardError, match=r"is 10,485,760 bytes; the limit is 262,144"):
            import_card(tmp_path, "big", _json(card))
    with pytest.raises(CardError, match=r"the file is .* bytes; the limit is 1,000"):
        import_card(tmp_path, "big", _json(v3_spec_card()), limits=Limits(max_file_bytes=1000))
    _nothing_written(tmp_path)


def test_ten_thousand_entries_are_refused_or_bounded(tmp_path: Path) -> None:
    card = minimal_v2_card()
    entry = {"keys": ["k"], "content": "c", "extensions": {}, "enabled": True, "insertion_order": 1}
    card["data"]["character_book"] = {"extensions": {}, "entries": [dict(entry, id=i) for i in range(10_000)]}
    with pytest.raises(CardError, match="the lorebook has 10,000 entries; the limit is 1,000"):
        import_card(tmp_path, "many", _json(card))
    _nothing_written(tmp_path)
    import_card(tmp_path, "host", _json(minimal_v2_card()))
    with pytest.raises(CardError, match="10,000 entries"):
        import_lorebook(tmp_path, "host", "huge", _json(world_info(10_000)))
    assert not (tmp_path / "personas" / "host" / "lore").exists()


def test_a_failed_replace_keeps_the_old_persona(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import_card(tmp_path, "sera", _json(v3_spec_card()))
    before = _tree(tmp_path / "personas" / "sera")
    with pytest.raises(CardError, match="already exists"):
        import_card(tmp_path, "sera", _json(v2_card()))
    import gateway.personas.card_import as cards

    def crash(*_: Any, **__: Any) -> None:
        raise OSError("disk gone mid-import")

    monkeypatch.setattr(cards, "_fsync_dir", crash)
    with pytest.raises(OSError, match="disk gone"):
        import_card(tmp_path, "sera", _json(v2_card()), overwrite=True)
    assert _tree(tmp_path / "personas" / "sera") == before
    assert [p.name for p in (tmp_path / "personas").iterdir()] == ["sera"], "no temporary directory left"
    monkeypatch.undo()
    import_card(tmp_path, "sera", _json(v2_card()), overwrite=True)
    assert json.loads(export_card(tmp_path, "sera", "v2")) == v2_card()


def test_leftovers_of_a_killed_import_are_repaired(tmp_path: Path) -> None:
    import os
    import time

    import_card(tmp_path, "sera", _json(v3_spec_card()))
    base = tmp_path / "personas"
    # Killed between moving the old persona away and moving the new one in; and a stale temp dir.
    os.rename(base / "sera", base / ".sera.old-deadbeef")
    (base / ".x.import-0badf00d").mkdir()
    (base / ".x.import-0badf00d" / "IDENTITY.md").write_text("half")
    old = time.time() - 7200
    os.utime(base / ".x.import-0badf00d", (old, old))
    from gateway.personas.choice import on_disk
    assert on_disk(tmp_path) == [], "dot-names are never personas"
    import_card(tmp_path, "other", _json(minimal_v2_card()))
    assert sorted(p.name for p in base.iterdir()) == ["other", "sera"]
    assert json.loads(export_card(tmp_path, "sera", "v3")) == v3_spec_card()
