"""The words of a person's full-text query, cut alike by both backends (``search_sessions``,
``rows_with_words``): SQLite's FTS5 and PostgreSQL's ``tsquery`` get the same words."""

from __future__ import annotations

import re

# Every word must match, so words past this narrow almost nothing while each costs the index a lookup.
MAX_QUERY_WORDS = 16

# Control characters and lone surrogates (JSON may carry either) separate words, as they do for FTS5's
# tokenizer: kept in a word, a NUL ends FTS5's quoted string early ("unterminated string", a 500 the
# API fuzz test found) and PostgreSQL refuses the text outright.
_SEPARATORS = re.compile(r"[\s\x00-\x1f\x7f\ud800-\udfff]+")


def query_words(text: str) -> list[str]:
    """The first ``MAX_QUERY_WORDS`` words of ``text``, split at whitespace and control characters
    (none for a blank text)."""
    return [w for w in _SEPARATORS.split(text) if w][:MAX_QUERY_WORDS]
