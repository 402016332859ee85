"""Memory scopes: the names recall filters on, and the directory each one owns.

``user:<id>`` -> ``<data_dir>/users/<id>/``; ``channel:<channel>-<conversation>`` ->
``<data_dir>/channels/<channel>-<conversation>/`` (or a hashed name, see ``channel_scope``);
``persona:<name>`` -> ``<data_dir>/personas/<name>/``.
A scope is validated before it names a directory, so no scope string can point outside its kind's
folder.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import quote

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+=-]{0,127}$")
KINDS = {"user": "users", "channel": "channels", "persona": "personas"}
_UNSAFE_HINT = re.compile(r"[^A-Za-z0-9_@+=-]")  # and no dot: a hint never holds ".."
HINT_CHARS = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


class ScopeError(ValueError):
    """A scope string that names no valid root."""


def user_scope(user_id: str) -> str:
    return f"user:{user_id}"


def channel_scope(key: str) -> str:
    """``telegram:-1001`` -> ``channel:telegram--1001``; unsafe characters are percent-encoded (``=``
    for ``%``). A key whose encoded name names no directory (longer than 128 characters, as a Matrix
    room on a long server name is; starting with neither letter nor digit, holding ``..`` or ``~``)
    is named ``X-<hash of the key>-<the name's first safe characters>`` instead: ``X`` starts no
    channel's name (they are lowercase), so these never meet a name the encoding gives, and every key
    has a root. The names the encoding gives are kept as they are: existing roots stay where they are."""
    channel, _, conversation = key.partition(":")
    name = f"{channel}-{conversation}" if conversation else channel
    quoted = quote(name, safe="-_.@+=", errors="surrogatepass").replace("%", "=")
    # A lone surrogate (JSON can carry one) is not UTF-8: such a key gets the hashed name too.
    if _ID.match(quoted) and ".." not in quoted and not _SURROGATE.search(name):
        return "channel:" + quoted
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    hint = _UNSAFE_HINT.sub("", quoted)[:HINT_CHARS]
    return f"channel:X-{digest}" + (f"-{hint}" if hint else "")


def root_for(data_dir: Path, scope: str) -> Path:
    kind, _, name = scope.partition(":")
    if kind not in KINDS or not _ID.match(name) or ".." in name:
        raise ScopeError(f"invalid memory scope {scope!r} (want user:<id>, channel:<key>, persona:<name>)")
    return data_dir / KINDS[kind] / name


def known_scopes(data_dir: Path) -> list[str]:
    """Every scope that has a directory (symlinked or malformed entries are skipped)."""
    out = []
    for kind, folder in KINDS.items():
        base = data_dir / folder
        if base.is_dir():
            for p in sorted(base.iterdir()):
                if p.is_dir() and not p.is_symlink() and _ID.match(p.name) and ".." not in p.name:
                    out.append(f"{kind}:{p.name}")
    return out
