"""Splitting replies to a platform's message-length limit, preserving order and readability."""

from __future__ import annotations


def split_text(text: str, limit: int) -> list[str]:
    """Split at paragraph, then line, then word boundaries; hard-cut only unbroken runs."""
    if limit <= 0:
        raise ValueError("limit must be positive")
    text = text.strip("\n")
    if len(text) <= limit:
        return [text] if text else []
    chunks: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = -1
        for sep in ("\n\n", "\n", " "):
            idx = window.rfind(sep)
            if idx >= limit // 3:
                cut = idx
                break
        if cut <= 0:
            chunks.append(window)
            rest = rest[limit:]
        else:
            chunks.append(rest[:cut].rstrip())
            rest = rest[cut:].lstrip("\n ")
    if rest.strip():
        chunks.append(rest)
    return [c for c in chunks if c]
