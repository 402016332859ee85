"""A person's own personas (``/setup persona``): which persona on disk belongs to whom.

A persona a person made is an ordinary persona directory (so loading, lore, sessions and the file
watcher treat it like any other) with one more file, ``OWNER``, holding the person's user id. Only its
owner may choose it; other people never see it listed (its soul holds what its owner told it). Its
directory name ends in the owner's id, so it can never take the name of a persona the operator
configures later (a configured persona that exists is never re-created: it would be someone's).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

from gateway.config import PERSONA_NAME

OWNER_FILE = "OWNER"
_NAME = re.compile(PERSONA_NAME)


def owner_of(data_dir: Path, name: str) -> str | None:
    """The user id that made persona ``name``; None for the operator's personas."""
    path = Path(data_dir) / "personas" / name / OWNER_FILE
    try:
        return path.read_text(encoding="utf-8").strip()[:200] or None
    except (OSError, UnicodeDecodeError):
        return None


def visible_to(data_dir: Path, names: list[str], user_id: str) -> list[str]:
    """``names`` without the personas other people made."""
    return [n for n in names if owner_of(data_dir, n) in (None, user_id)]


def owned(data_dir: Path, names: list[str], user_id: str) -> list[str]:
    return [n for n in names if owner_of(data_dir, n) == user_id]


def dir_name(title: str, user_id: str) -> str:
    """``Night Owl`` of ``u1a2b3c4d5e6`` -> ``night-owl-u1a2b3c4d5e6``: the person's words cut to a slug,
    then the owner's id (a digest of it when the id itself is not a valid name part)."""
    ascii_ = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode().lower()
    slug = "-".join(re.findall(r"[a-z0-9]+", ascii_))[:40].strip("-") or "persona"
    tail = user_id if _NAME.match(user_id) and len(user_id) <= 20 else hashlib.sha256(user_id.encode()).hexdigest()[:12]
    return f"{slug}-{tail}"
