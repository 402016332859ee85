"""The words of a person's full-text query, cut alike by both backends (``search_sessions``,
``rows_with_words``): SQLite's FTS5 and PostgreSQL's ``tsquery`` get the same words."""

from __future__ import annotations

# Every word must match, so words past this narrow almost nothing while each costs the index a lookup.
MAX_QUERY_WORDS = 16


def query_words(text: str) -> list[str]:
    """The first ``MAX_QUERY_WORDS`` whitespace-separated words of ``text`` (none for a blank text)."""
    return text.split()[:MAX_QUERY_WORDS]
