"""``kith persona import | export``: cards and lorebooks through the CLI, errors as exit 2 with a reason."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml

from gateway.cli.main import main as kith
from gateway.personas.png import text_chunks
from tests.persona.cards import card_png, image_png, v3_spec_card, world_info


def _cfg(tmp_path: Path) -> list[str]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data")}))
    return ["-c", str(cfg), "persona"]


def test_import_and_export_a_png_card_and_a_lorebook(tmp_path: Path, capsys: Any) -> None:
    c = _cfg(tmp_path)
    card = v3_spec_card()
    src = tmp_path / "sera.png"
    src.write_bytes(card_png(ccv3=card, image=image_png()))
    assert kith([*c, "import", str(src), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["persona"] == "seraphina" and out["lore_entries"] == 5 and out["image"] is True

    assert kith([*c, "export", "seraphina", "-o", str(tmp_path / "out.png")]) == 0
    png = (tmp_path / "out.png").read_bytes()
    assert json.loads(base64.b64decode(text_chunks(png)["ccv3"])) == card
    capsys.readouterr()
    assert kith([*c, "export", "seraphina", "--format", "v2"]) == 0
    assert json.loads(capsys.readouterr().out)["spec"] == "chara_card_v2"

    wi = tmp_path / "world.json"
    wi.write_text(json.dumps(world_info(2)))
    assert kith([*c, "import", str(wi), "--lore", "seraphina"]) == 0
    assert "imported 2 lore entries (st-world-info)" in capsys.readouterr().out
    assert kith([*c, "export", "seraphina", "--lore", "world", "--format", "st-world-info"]) == 0
    assert json.loads(capsys.readouterr().out) == world_info(2)

    assert kith([*c, "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["personas"]}
    assert rows["seraphina"]["card"] and rows["seraphina"]["lorebooks"] == ["card", "world"]


def test_errors_exit_2_with_the_reason_and_write_nothing(tmp_path: Path, capsys: Any) -> None:
    c = _cfg(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"spec": "chara_card_v9", "data": {"name": "x"}}))
    assert kith([*c, "import", str(bad)]) == 2
    assert "unsupported card spec 'chara_card_v9'" in capsys.readouterr().err
    many = tmp_path / "many.json"
    many.write_text(json.dumps(world_info(50)))
    src = tmp_path / "sera.json"
    src.write_text(json.dumps(v3_spec_card()))
    assert kith([*c, "import", str(src), "--name", "sera"]) == 0
    assert kith([*c, "import", str(many), "--lore", "sera", "--max-entries", "10"]) == 2
    assert "the lorebook has 50 entries; the limit is 10" in capsys.readouterr().err
    assert kith([*c, "import", str(src), "--name", "sera"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert kith([*c, "export", "nobody"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "data" / "personas").iterdir()) == ["sera"]
    assert sorted(p.name for p in (tmp_path / "data" / "personas" / "sera" / "lore").iterdir()) == ["card"]
