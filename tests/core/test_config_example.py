"""config.yaml.example documents every key and is itself a valid configuration."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel

from gateway.config import Config
from gateway.configread import load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "config.yaml.example"


def _paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.extend(_paths(ann, f"{prefix}{name}."))
        else:
            out.append(f"{prefix}{name}")
    return out


def test_example_is_valid() -> None:
    load_config(EXAMPLE, env={})


def test_example_has_every_key() -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    # The channels' sections are declared by their plugins (gateway.channels): the model a config is
    # read with has them, ``Config`` itself does not.
    channels = type(load_config(EXAMPLE, env={}).channels)
    assert {"websocket", "telegram", "discord", "nextcloud"} <= set(channels.model_fields)
    missing = []
    for path in _paths(Config) + _paths(channels, "channels."):
        node = data
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(path)
                break
            node = node[part]
    assert not missing, f"keys missing from config.yaml.example: {missing}"
