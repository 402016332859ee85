"""The curation audit (``<file>.audit.jsonl``) and the pre-run backups that make rollback exact.

Each run appends one ``op`` record per op (applied or rejected) and then one ``run`` record carrying
the SHA-256 of the file before and after and, when the file changed, the path of a content-addressed
copy of the pre-run text (``_history/<file>.<sha256>.bak``; not dot-named because the store reserves
dot names, not ``.md`` so the indexer does not treat it as memory). Rollback writes that copy back
byte for byte. Records are JSON objects, one per line; see docs/knowledge.md for the fields.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from gateway.memory.curation.types import Writer
from gateway.util.jsonl import json_objects

HISTORY_DIR = "_history"
MAX_AUDIT_BYTES = 192 * 1024  # below the store's default 256 KiB file cap; oldest lines go first


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def audit_rel(rel: str) -> str:
    return f"{rel}.audit.jsonl"


def backup_rel(rel: str, sha: str) -> str:
    return f"{HISTORY_DIR}/{rel.replace('/', '__')}.{sha}.bak"


def save_backup(store: Writer, rel: str, text: str, *, source: str) -> str:
    """Store ``text`` under its hash (once: same text, same path) and return the path."""
    path = backup_rel(rel, sha256_text(text))
    if not store.exists(path):
        store.write(path, text, source=source)
    return path


def append_records(
    store: Writer, rel: str, records: Iterable[dict[str, Any]], *, source: str, max_bytes: int = MAX_AUDIT_BYTES
) -> None:
    """Append records to the audit of ``rel``, trimming the oldest whole lines past ``max_bytes``."""
    path = audit_rel(rel)
    old = store.read(path) if store.exists(path) else ""
    if old and not old.endswith("\n"):
        old += "\n"  # a torn last line stays a line of its own; readers skip what does not parse
    new = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    text = old + new
    while len(text.encode("utf-8")) > max_bytes and "\n" in text[:-1]:
        text = text.split("\n", 1)[1]
    store.write(path, text, source=source)


def read_records(store: Writer, rel: str) -> Iterator[dict[str, Any]]:
    path = audit_rel(rel)
    if store.exists(path):
        yield from json_objects(store.read(path))


def drop_history(store: Writer, rel: str, *, source: str) -> list[str]:
    """Delete the audit of ``rel`` and the pre-run copies its run records name: what retention does
    when ``rel`` itself expires (a writer's slot summary), so no copy of it outlives it. Only copies
    of ``rel`` itself (by their name) are deleted, whatever an altered audit says. Returns the paths."""
    delete = getattr(store, "delete", None)
    if not callable(delete):
        return []
    own = f"{HISTORY_DIR}/{rel.replace('/', '__')}."
    paths = {str(r["backup"]) for r in read_records(store, rel)
             if r.get("type") == "run" and isinstance(r.get("backup"), str) and str(r["backup"]).startswith(own)}
    paths.add(audit_rel(rel))
    gone = sorted(p for p in paths if store.exists(p))
    for path in gone:
        delete(path, source=source)
    return gone
