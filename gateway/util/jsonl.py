"""Reading JSON-lines logs (``*.audit.jsonl``, ``QUARANTINE.jsonl``) that are only ever appended to.

A crash mid-append leaves a torn last line, and a person may edit the file by hand: a reader skips
every line that is not a whole JSON object instead of failing on it, so one bad line never hides the
rest. A leaf: it imports only the standard library (memory's files and curation may use it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``text``, one a line, in order; any other line is skipped."""
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value
