"""Text chosen by other people (display names, account ids), made safe before it is shown.

A display name is set by whoever owns the account, so it can carry terminal control sequences
(``ESC ] 0;title BEL`` retitles the operator's terminal, ``ESC [2J`` clears it, some terminals answer
queries by typing into the shell), bidirectional overrides that reorder what the reader sees, or line
breaks that fake a second line of output. ``printable`` keeps such text visible but inert for a
terminal; ``one_line`` makes a short, single-line label for a chat message.
"""

from __future__ import annotations

import unicodedata

# Unicode categories that draw nothing themselves: controls (C0, DEL, C1), format characters
# (bidi overrides and isolates, zero-width joiners), separators that break lines, and unassigned or
# private-use code points whose rendering no one can predict.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _hidden(ch: str) -> bool:
    return unicodedata.category(ch) in _HIDDEN


def printable(text: str) -> str:
    """``text`` with every control or format character shown as an escape (``\\x1b``, ``\\u202e``).

    For terminal output: nothing the sender wrote can move the cursor, change the title, clear the
    screen, reorder the line or start a new one, and the operator still sees that something was there.
    A backslash is escaped too, so an escape the sender typed literally cannot pass for one we made.
    """
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif _hidden(ch):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def one_line(text: str, limit: int = 64) -> str:
    """A label for a chat message: hidden characters dropped, whitespace collapsed, at most ``limit``."""
    kept = "".join(" " if ch.isspace() else ch for ch in text if ch.isspace() or not _hidden(ch))
    label = " ".join(kept.split())
    return label if len(label) <= limit else label[: limit - 1].rstrip() + "…"
