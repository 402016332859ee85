"""docs/architecture.md describes every package: a folder with ``__init__.py`` under ``gateway/``,
``plugins/`` or ``adapters/`` has its line in the layout tree ("## Layout"), where indentation (two
spaces a level) says what it sits in. A package added, moved or renamed without its line fails here.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
TOPS = ("gateway", "plugins", "adapters")


def packages(root: Path = ROOT) -> list[str]:
    return sorted(p.parent.relative_to(root).as_posix() for top in TOPS for p in (root / top).rglob("__init__.py"))


def documented_folders(text: str) -> set[str]:
    """The folders of the layout tree: ``name/`` first on its line, nested by its indentation."""
    section = text.split("## Layout", 1)[1]
    block = section.split("```", 2)[1]
    found: set[str] = set()
    stack: list[str] = []
    for line in block.splitlines():
        stripped = line.lstrip(" ")
        word = stripped.split(" ", 1)[0]
        if not word.endswith("/"):
            continue
        depth = (len(line) - len(stripped)) // 2
        stack = [*stack[:depth], word.rstrip("/")]
        path = "/".join(stack)
        found.add(path)
        while "/" in path:  # "web/static/" documents web/ too
            path = path.rpartition("/")[0]
            found.add(path)
    return found


def test_documented_folders_follow_the_indentation() -> None:
    text = "## Layout\n\n```\ngateway/   the host\n  turn/    the turn\n    deep/  x\n  web/static/  page\n" \
           "plugins/   stages\n  tools/  one a tool\n```\n"
    assert documented_folders(text) == {"gateway", "gateway/turn", "gateway/turn/deep", "gateway/web",
                                        "gateway/web/static", "plugins", "plugins/tools"}


def test_every_package_is_in_the_layout() -> None:
    missing = [p for p in packages() if p not in documented_folders(DOC.read_text(encoding="utf-8"))]
    assert not missing, ("packages without their line in docs/architecture.md (## Layout): "
                         + ", ".join(missing))
