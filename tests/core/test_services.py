"""``gateway.app.Gateway`` implements ``gateway.services.Services``, the Protocol modules type the
gateway against: no type checker runs in the suite, so the members are compared here."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from gateway.app import Gateway
from gateway.services import Services

ROOT = Path(__file__).resolve().parents[2]


def _protocol_members() -> dict[str, object]:
    names = dict.fromkeys(inspect.get_annotations(Services), None)
    names.update({n: v for n, v in vars(Services).items()
                  if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))})
    return names


def _instance_attributes() -> set[str]:
    """``self.<name>`` set or declared in ``Gateway.__init__``."""
    tree = ast.parse((ROOT / "gateway" / "app.py").read_text(encoding="utf-8"))
    init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    found = set()
    for node in ast.walk(init):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                found.add(t.attr)
    return found


def test_the_gateway_has_every_member_of_services() -> None:
    attributes = _instance_attributes()
    missing = [n for n in _protocol_members() if n not in attributes and not hasattr(Gateway, n)]
    assert not missing, f"Services members Gateway lacks: {missing}"


def test_methods_take_the_same_parameters() -> None:
    for name, member in _protocol_members().items():
        if inspect.isfunction(member):
            ours = list(inspect.signature(getattr(Gateway, name)).parameters)
            assert ours == list(inspect.signature(member).parameters), f"Services.{name} differs from Gateway.{name}"
        elif isinstance(member, property):
            assert isinstance(getattr(Gateway, name, None), property) or name in _instance_attributes(), name
