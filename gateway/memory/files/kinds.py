"""Which files of a memory root the index reads: Markdown and plain text, never an audit log.

The rule lives with the files, not the index: the file watcher and ``/forget`` apply it too, and
neither should import the indexer (numpy and Qdrant) to know it.
"""

from __future__ import annotations

INDEXED_SUFFIXES = (".md", ".txt")


def indexable(rel: str) -> bool:
    return rel.endswith(INDEXED_SUFFIXES) and not rel.endswith(".audit.jsonl")
