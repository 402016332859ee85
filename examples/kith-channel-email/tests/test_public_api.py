"""The package imports nothing of kith's but its public API, as docs/plugins.md ("The public API") lists it:
a third party's channel could be written the same way."""

from __future__ import annotations

import ast
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "src" / "kith_channel_email"
KITH = ("gateway", "adapters", "plugins", "bench")  # kith's top-level packages


def public_api() -> dict[str, set[str]]:
    """Module -> the names docs/plugins.md makes public (an empty set: the whole module)."""
    text = (HERE.parents[2] / "docs" / "plugins.md").read_text()
    section = text.split("## The public API", 1)[1].split("\n## ", 1)[0]
    public: dict[str, set[str]] = {}
    prose, _, table = section.partition("| module |")
    for module, names in re.findall(r"`((?:gateway|adapters)\.[\w.]+)`(?: \(([^)]*)\))?", prose):
        public.setdefault(module, set()).update(re.findall(r"`(\w+)`", names))
    for row in re.findall(r"^\| `([\w.]+)` \| ([^|]+) \|", table, re.M):
        public.setdefault(row[0], set()).update(re.findall(r"`(\w+)`", row[1]))
    return public


def kith_imports() -> list[tuple[str, str, str]]:
    """(file, module, name) of every import of kith's, anywhere in the package (typing-only ones too)."""
    found = []
    for path in sorted(SOURCE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in KITH:
                found += [(path.name, node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(path.name, a.name, "*") for a in node.names if a.name.split(".")[0] in KITH]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args:
                name = node.args[0].value if isinstance(node.args[0], ast.Constant) else ""
                if str(name).split(".")[0] in KITH:
                    found.append((path.name, str(name), "*"))
    return found


def test_only_the_documented_public_api_is_imported() -> None:
    public = public_api()
    assert public["gateway.adapter"] >= {"Adapter", "AdapterAuthError", "AdapterRegistry"}  # the list was read
    imports = kith_imports()
    assert ("adapter.py", "gateway.adapter", "Adapter") in imports  # and the imports were found
    outside = [(f, m, n) for f, m, n in imports
               if m not in public or (public[m] and n not in public[m] and not n.startswith("TRIM_"))]  # fmt: skip
    assert outside == [], f"kith's inside imported (make it public in docs/plugins.md, or do without): {outside}"
