"""Splitting replies to a platform's message-length limit, preserving order and readability.

Cuts land at a paragraph, then a line, then a word boundary, and only unbroken runs are cut hard. A
chunk that ends inside a fenced code block is closed with a fence and the next chunk reopens it, so
every chunk renders on its own. The host splits a reply once for the owning adapter's limit
(``gateway.turn.protocol``); adapters re-split only chunks that still exceed it.
"""

from __future__ import annotations

import re

_FENCE = "```"
# Reserve room for a closing fence plus newline, and a reopening fence with its language tag.
_FENCE_RESERVE = 24


def _cut_point(text: str, limit: int) -> int:
    """Best index <= limit to cut at: paragraph break, then line break, then space, else hard."""
    window = text[:limit]
    for sep in ("\n\n", "\n", " "):
        idx = window.rfind(sep)
        # A cut in the first quarter would produce a tiny chunk; prefer a harder cut then.
        if idx >= limit // 4:
            return idx + len(sep)
    return limit


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters, in order, none empty.

    Whitespace at a cut is kept with the earlier chunk and stripped from its end, so joining the
    chunks with a newline reproduces the message up to whitespace at the seams.
    """
    if limit < _FENCE_RESERVE * 2:
        raise ValueError(f"limit {limit} too small")
    text = text.strip()
    chunks: list[str] = []
    reopen = ""  # fence line to reopen at the start of the next chunk ("" = not inside a fence)
    while text:
        body, text, reopen = take_chunk(text, limit, reopen)
        if body:
            chunks.append(body)
    return chunks


def take_chunk(text: str, limit: int, reopen: str = "") -> tuple[str, str, str]:
    """One step of ``split_text``: (the first chunk, the text after it, the fence line the next chunk
    reopens). ``text`` is stripped at the start; ``reopen`` is what the previous step returned.

    The cut depends only on the first ``limit`` characters and on whether anything follows, so a
    reply streamed in pieces is cut where the whole reply would be (gateway/delivery/stream.py).
    """
    budget = limit - len(reopen) - (len(reopen) and 1)
    if len(text) <= budget:
        piece, text = text, ""
    else:
        cut = _cut_point(text, budget - _FENCE_RESERVE)
        piece, text = text[:cut], text[cut:].lstrip("\n ")
    body = f"{reopen}\n{piece}" if reopen else piece
    fences = re.findall(r"^```[^\n]*$", body, flags=re.M)
    if len(fences) % 2 == 1 and text:
        # Chunk ends inside a code block: close it here, reopen with the same language next.
        body = body.rstrip() + "\n" + _FENCE
        # A very long info string would eat the budget; reopening plain is still correct.
        reopen = fences[-1] if len(fences[-1]) <= _FENCE_RESERVE - 4 else _FENCE
    else:
        reopen = ""
    return body.rstrip(), text, reopen
