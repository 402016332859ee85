"""The portable stores' placeholders as psycopg reads them.

The stores write ``?`` and ``:name`` (``gateway.state.database``: the SQL both servers speak); psycopg
takes ``%s`` and ``%(name)s`` and reads ``%`` everywhere in a statement sent with arguments (every
statement is, possibly with none), so a ``%`` of the SQL itself is doubled, in string literals too.
Nothing else is rewritten: upserts, ``RETURNING`` and the rest are already written the way PostgreSQL
takes them, and what has no common form is this backend's own store (``transcript``, ``people``).
"""

from __future__ import annotations

import re
from functools import lru_cache

_LITERAL = re.compile(r"('(?:[^']|'')*')")
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def _code(part: str) -> str:
    return _NAMED.sub(r"%(\1)s", part.replace("%", "%%").replace("?", "%s"))


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """``sql`` (as the portable stores write it) with psycopg's placeholders."""
    parts = _LITERAL.split(sql)
    return "".join(p.replace("%", "%%") if i % 2 else _code(p) for i, p in enumerate(parts))
