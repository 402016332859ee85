"""Issue 27, low item: ``kith persona import`` of a deeply nested card printed a RecursionError
traceback. A card or lorebook nested past ``MAX_DEPTH`` levels is refused with an error line (exit 2),
whether it comes as JSON, inside a PNG, or as a lorebook, and nothing is written."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.cli.main import main as kith
from gateway.personas.cards import MAX_DEPTH
from tests.persona.cards import image_png, png_chunk, v3_spec_card


def _cfg(tmp_path: Path) -> list[str]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data")}))
    return ["-c", str(cfg), "persona"]


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _card(levels: int) -> str:
    """A V3 card whose extensions hold ``levels`` nested lists (json.dumps itself would recurse)."""
    return ('{"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Deep", "description": "d",'
            f' "extensions": {{"x": {_nested(levels)}}}}}}}')


@pytest.mark.parametrize("levels", [200_000, MAX_DEPTH + 1])
@pytest.mark.parametrize("form", ["json", "png"])
def test_a_deep_card_is_an_error_line(tmp_path: Path, capsys: Any, levels: int, form: str) -> None:
    c = _cfg(tmp_path)
    src = tmp_path / f"deep.{form}"
    text = _card(levels)
    if form == "png":
        chunk = png_chunk(b"tEXt", b"ccv3\x00" + base64.b64encode(text.encode()))
        src.write_bytes(image_png()[:-12] + chunk + png_chunk(b"IEND", b""))  # before the 12-byte IEND
    else:
        src.write_text(text)
    assert kith([*c, "import", str(src)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"nested more than {MAX_DEPTH} levels" in err and "Traceback" not in err
    assert not (tmp_path / "data" / "personas" / "deep").exists()


def test_a_deep_lorebook_is_an_error_line(tmp_path: Path, capsys: Any) -> None:
    c = _cfg(tmp_path)
    card = tmp_path / "sera.json"
    card.write_text(json.dumps(v3_spec_card()))
    assert kith([*c, "import", str(card)]) == 0
    book = tmp_path / "book.json"
    book.write_text('{"entries": {"0": {"key": ["k"], "content": ' + _nested(200_000) + "}}}")
    capsys.readouterr()
    assert kith([*c, "import", str(book), "--lore", "seraphina"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "nested" in err and "Traceback" not in err


def test_a_card_at_the_limit_imports(tmp_path: Path) -> None:
    c = _cfg(tmp_path)
    src = tmp_path / "ok.json"
    src.write_text(_card(MAX_DEPTH - 4))  # the card object, data, extensions and "x" are the other 4
    assert kith([*c, "import", str(src)]) == 0
