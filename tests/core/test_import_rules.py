"""Rules about what the source may depend on, read from the code itself with ``ast``.

1. **The host knows no platform and no stage.** No module under ``gateway/`` imports ``adapters`` or
   ``plugins``: the adapter contract lives in ``gateway/adapter.py`` and adapters implement it;
   stages reach the host only through hooks. Built-ins are loaded by module-name *strings*
   (``gateway/plugins.py`` ``BUILTIN_PLUGINS``), which is not an import of their code. No carve-out:
   ``gateway/cli`` goes through the gateway too (``kith worker`` asks the registered job specs which
   jobs need the memory index instead of importing ``plugins.memory_index``).
2. **Hooks are called through their typed methods.** Only ``gateway/hooks.py`` (one method per hook)
   and ``gateway/hookcall.py`` (the awaiting and isolation underneath) reach ``pm.hook`` or call a
   hook by its name; everything else calls ``gateway.hooks.<hook>(...)``.
3. **Plugins hold no SQL** (issue 13, item 1): added with the ``gateway/state/`` package, in the
   section marked below.
4. **No platform model in the host's config** (issue 29, item 3). A channel's section is declared by
   the plugin that provides it (``gateway_register_channels``, ``gateway/channels.py``); the host
   defines no channel model (no subclass of ``ChannelConfig``/``ChannelAccess`` besides
   ``ChannelAccess`` itself, no config class named after a platform) and names no platform's
   section (``config.channels.telegram``, ``channels.get("discord")``).
5. **The memory wing is layered** (issue 29, item 2). ``gateway/memory/files/`` is the bottom: it
   imports no other memory package and none of the host's turn path, config, database, bus or models
   (``files/watch.py`` once imported the indexer, ``files/working.py`` the budgeter). Each package of
   the wing imports only the packages below it (``MEMORY_LAYERS``), and nothing in the wing imports
   the plugin loader or names a plugin: the gateway says what its stages need.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.source_tree import SOURCE_GROUP, parsed

pytestmark = pytest.mark.xdist_group(SOURCE_GROUP)  # one worker parses the tree once (tests/source_tree.py)

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("gateway", "plugins", "adapters", "bench", "tests")


def _modules(*dirs: str) -> Iterator[tuple[str, ast.Module]]:
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            yield rel, parsed(path, rel)


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def imported_names(node: ast.AST) -> list[str]:
    """The modules an import statement names; a relative import names none outside its package."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


# ----------------------------------------------------------------------- 1. the host imports no platform

FORBIDDEN_IN_HOST = {"adapters", "plugins"}
_IMPORT_BY_NAME = {"import_module", "__import__"}


def host_import_violations(rel: str, tree: ast.Module) -> list[str]:
    """Imports of ``adapters``/``plugins`` in one host module, TYPE_CHECKING blocks included (a type
    from a plugin is a dependency on it too), and ``import_module("plugins.x")`` outside the loader."""
    found = []
    for node in ast.walk(tree):
        names = imported_names(node)
        if (isinstance(node, ast.Call) and rel != "gateway/plugins.py" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr in _IMPORT_BY_NAME)
                   or (isinstance(node.func, ast.Name) and node.func.id in _IMPORT_BY_NAME))):
            names = [node.args[0].value]
        found += [f"{rel}:{node.lineno} imports {n}" for n in names if _top(n) in FORBIDDEN_IN_HOST]
    return found


def test_the_host_imports_no_adapter_and_no_plugin() -> None:
    violations = [v for rel, tree in _modules("gateway") for v in host_import_violations(rel, tree)]
    assert not violations, "the host must not depend on adapters or plugins:\n" + "\n".join(violations)


# Each form of import rule 1 forbids, and two it allows; checked by test_each_rule_finds_every_form.
HOST_FORMS = (
    "import adapters.telegram\n"
    "from plugins.memory_index import INDEX_JOBS\n"
    "from typing import TYPE_CHECKING\n"
    "if TYPE_CHECKING:\n    from adapters.base import Adapter\n"
    "def f():\n    from plugins import tools\n"
    "importlib.import_module('plugins.distill')\n"
    "from gateway.plugins import build_plugin_host\n"  # the host's own loader: allowed
    "BUILTIN = ('plugins.recall', 'adapters.builtin')\n"  # names as strings: allowed
)
HOST_FOUND = [
    "gateway/example.py:1 imports adapters.telegram", "gateway/example.py:2 imports plugins.memory_index",
    "gateway/example.py:5 imports adapters.base", "gateway/example.py:7 imports plugins",
    "gateway/example.py:8 imports plugins.distill",
]


# ------------------------------------------------------------------ 2. hooks only through typed methods

HOOK_MODULES = {"gateway/hooks.py", "gateway/hookcall.py"}
_BY_NAME_CALLS = {"call_first", "call_all", "call_historic", "call_register", "call_sync_all"}


def hook_call_violations(rel: str, tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "hook":
            found.append(f"{rel}:{node.lineno} reaches <plugin manager>.hook")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _BY_NAME_CALLS:
            found.append(f"{rel}:{node.lineno} calls a hook by name ({node.func.attr})")
    return found


def test_hooks_are_called_only_through_the_typed_methods() -> None:
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    violations = [v for rel, tree in _modules(*SOURCE_DIRS) if rel not in HOOK_MODULES | {this}
                  for v in hook_call_violations(rel, tree)]
    assert not violations, "call hooks through gateway.hooks.Hooks methods:\n" + "\n".join(violations)


# Each form of hook call rule 2 forbids, and the one it allows.
HOOK_FORMS = (
    "pm.hook.gateway_configure.call_historic(kwargs={})\n"
    "await gateway.hooks.call_first(\n    'gateway_filter_inbound', message=m)\n"
    "await hooks.call_all('gateway_flush', gateway=gw)\n"
    "await gateway.hooks.filter_inbound(m)\n"  # the typed method: allowed
)
HOOK_FOUND = [
    "plugins/example.py:1 reaches <plugin manager>.hook", "plugins/example.py:1 calls a hook by name (call_historic)",
    "plugins/example.py:2 calls a hook by name (call_first)", "plugins/example.py:4 calls a hook by name (call_all)",
]


# ------------------------------------------------------- 4. no platform model in the host's config

PLATFORMS = ("telegram", "discord", "nextcloud")  # the built-in platform channels (adapters/builtin.py)
_CHANNEL_BASES = {"ChannelConfig", "ChannelAccess"}
_MODEL_BASES = _CHANNEL_BASES | {"Section", "BaseModel"}


def _base_names(node: ast.ClassDef) -> set[str]:
    return {b.id if isinstance(b, ast.Name) else b.attr for b in node.bases if isinstance(b, ast.Name | ast.Attribute)}


def platform_config_violations(rel: str, tree: ast.Module) -> list[str]:
    """A channel model, a config class named after a platform, or a platform's section read by name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = _base_names(node)
            if bases & _CHANNEL_BASES and not (rel == "gateway/channels.py" and node.name == "ChannelAccess"):
                found.append(f"{rel}:{node.lineno} defines channel model {node.name}")
            elif bases & _MODEL_BASES and any(p in node.name.lower() for p in PLATFORMS):
                found.append(f"{rel}:{node.lineno} defines config class {node.name}")
        elif (isinstance(node, ast.Attribute) and node.attr in PLATFORMS and isinstance(node.value, ast.Attribute)
              and node.value.attr == "channels"):
            found.append(f"{rel}:{node.lineno} reads channels.{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "section") and isinstance(node.func.value, ast.Attribute)
              and node.func.value.attr == "channels" and node.args
              and isinstance(node.args[0], ast.Constant) and node.args[0].value in PLATFORMS):
            found.append(f"{rel}:{node.lineno} reads channels.{node.args[0].value}")
    return found


def test_no_platform_model_in_the_hosts_config() -> None:
    violations = [v for rel, tree in _modules("gateway") for v in platform_config_violations(rel, tree)]
    assert not violations, "channel sections belong to the plugins providing them:\n" + "\n".join(violations)
    # And the config model itself: the host's channels section declares nothing of its own.
    from gateway.channels import Channels
    from gateway.config import Config

    assert Channels.model_fields == {}
    assert Config.model_fields["channels"].annotation is Channels


PLATFORM_FORMS = (
    "class TelegramChannel(ChannelAccess):\n    token: str = ''\n"
    "class Pigeon(config.ChannelConfig):\n    pass\n"
    "class DiscordSettings(Section):\n    pass\n"
    "if cfg.channels.nextcloud.enabled:\n    pass\n"
    "tg = gateway.config.channels.section('telegram', Any)\n"
    "for c in config.channels.sections().values():\n    c.webhook_paths()\n"  # every channel alike: allowed
    "class TelegramThing:\n    pass\n"  # not a config model: allowed
)
PLATFORM_FOUND = [
    "gateway/example.py:1 defines channel model TelegramChannel", "gateway/example.py:3 defines channel model Pigeon",
    "gateway/example.py:5 defines config class DiscordSettings", "gateway/example.py:7 reads channels.nextcloud",
    "gateway/example.py:9 reads channels.telegram",
]


# ------------------------------------------------------------------------- 5. the memory wing's layers

# The memory packages each package of the wing may import (itself included). Top-level modules of the
# wing (``gateway/memory/*.py``: settings, the session-log writer) may import any of them.
MEMORY_LAYERS = {
    "files": {"files", "settings"},
    "curation": {"curation"},
    "knowledge": {"knowledge"},
    "search": {"search", "files", "settings"},
    # the user's own requests: remember, forget (by text and by meaning), undo
    "edit": {"edit", "files", "search", "knowledge"},
    # the job stages; hygiene is one of them, with a package of its own (docs/memory.md, "Hygiene")
    "background": {"background", "files", "curation", "knowledge", "hygiene", "settings"},
    "hygiene": {"hygiene", "files", "background"},
}
# What the bottom layer never reaches of the host: the turn's budgeter, the config, the database, the
# bus, the models and the plugin loader.
FILES_FORBIDDEN = ("gateway.config", "gateway.state", "gateway.bus", "gateway.llm",
                   "gateway.turn", "gateway.plugins")


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def memory_layer_violations(rel: str, tree: ast.Module) -> list[str]:
    parts = rel.split("/")
    if parts[:2] != ["gateway", "memory"]:
        return []
    package = parts[2] if len(parts) > 3 else None  # None: a top-level module of the wing
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("plugins."):
            found.append(f"{rel}:{node.lineno} names plugin {node.value}")
        names = imported_names(node)
        if isinstance(node, ast.ImportFrom) and node.module == "gateway.memory":  # from gateway.memory import files
            names = [f"gateway.memory.{a.name}" for a in node.names]
        for name in names:
            if _under(name, "gateway.plugins"):
                found.append(f"{rel}:{node.lineno} imports {name}")
            elif package is None:
                continue
            elif _under(name, "gateway.memory"):
                target = name.split(".")[2] if name.count(".") >= 2 else ""
                if target not in MEMORY_LAYERS.get(package, {package}):
                    found.append(f"{rel}:{node.lineno} imports {name}")
            elif package == "files" and any(_under(name, f) for f in FILES_FORBIDDEN):
                found.append(f"{rel}:{node.lineno} imports {name}")
    return found


def test_the_memory_wing_is_layered() -> None:
    violations = [v for rel, tree in _modules("gateway/memory") for v in memory_layer_violations(rel, tree)]
    assert not violations, "memory packages import only the layers below them:\n" + "\n".join(violations)
    assert set(MEMORY_LAYERS) == {p.name for p in (ROOT / "gateway/memory").iterdir()
                                  if (p / "__init__.py").exists()}, "every memory package has its layer"


MEMORY_FORMS = (
    "from gateway.memory.search.indexer import indexable\n"
    "from gateway.turn.budget import truncate_to_tokens\n"
    "def f():\n    from gateway.memory import background\n"
    "from gateway.plugins import build_plugin_host\n"
    "EVERY_TURN = ('plugins.recall',)\n"
    "from gateway.memory.files.store import MemoryStore\n"  # its own package: allowed
    "from gateway.memory.settings import MemoryConfig\n"  # the wing's settings: allowed
    "from gateway.types import StashKey\n"  # a leaf of the host: allowed
)
MEMORY_FOUND = [
    "gateway/memory/files/example.py:1 imports gateway.memory.search.indexer",
    "gateway/memory/files/example.py:2 imports gateway.turn.budget",
    "gateway/memory/files/example.py:4 imports gateway.memory.background",
    "gateway/memory/files/example.py:5 imports gateway.plugins",
    "gateway/memory/files/example.py:6 names plugin plugins.recall",
]


@pytest.mark.parametrize(("rule", "rel", "src", "found"), [
    pytest.param(host_import_violations, "gateway/example.py", HOST_FORMS, HOST_FOUND, id="host imports"),
    pytest.param(hook_call_violations, "plugins/example.py", HOOK_FORMS, HOOK_FOUND, id="hook calls"),
    pytest.param(platform_config_violations, "gateway/example.py", PLATFORM_FORMS, PLATFORM_FOUND,
                 id="platform config"),
    pytest.param(memory_layer_violations, "gateway/memory/files/example.py", MEMORY_FORMS, MEMORY_FOUND,
                 id="memory layers"),
])
def test_each_rule_finds_every_form(
    rule: Callable[[str, ast.Module], list[str]], rel: str, src: str, found: list[str]
) -> None:
    """The rules above cannot pass by not looking: every form they forbid is found, and only those."""
    assert sorted(rule(rel, ast.parse(src))) == sorted(found)


# -------------------------------------------------------------------------- 3. plugins hold no SQL
# (issue 13 item 1, with gateway/state/: a rule over plugins/ that fails on SQL text and execute(.)
# The detector and the rule over the whole tree are tests/core/test_storage_seam.py; here the two
# dependency rules of the seam: plugins hold no SQL, and the state package imports nothing of kith.


def test_plugins_hold_no_sql() -> None:
    from tests.core.test_storage_seam import violations

    paths = sorted((ROOT / "plugins").rglob("*.py"))
    bad = {p.relative_to(ROOT).as_posix(): v for p in paths if (v := violations(p.read_text(encoding="utf-8")))}
    assert bad == {}, "plugins call named state methods (gateway.state), never SQL"


def test_the_state_package_imports_nothing_else_of_kith() -> None:
    """gateway/state/ is the bottom layer: everything may import it, it imports only itself."""
    bad = []
    for rel, tree in _modules("gateway/state"):
        for node in ast.walk(tree):
            bad += [f"{rel}:{node.lineno} imports {n}" for n in imported_names(node)
                    if _top(n) in ("gateway", "plugins", "adapters", "bench", "tests")
                    and not (n == "gateway.state" or n.startswith("gateway.state."))]  # fmt: skip
    assert bad == []
