"""A file's name as the sender gave it, made safe to log, store and show.

The name is the sender's text: an upload's ``X-Filename``, a Telegram document's ``file_name``, a
Discord attachment's ``filename``. It can carry newlines that fake a second log line, terminal
escapes (``ESC ]0;`` retitles the operator's terminal) and bidirectional overrides that make
``gpj.exe`` read as ``exe.jpg`` (issue 27). ``clean_name`` is applied once, where a name enters the
media pipeline or the upload store, so every later log line, reply, transcript link and stored path
sees the clean name only.
"""

from __future__ import annotations

from gateway.util.safetext import one_line

MAX_NAME = 255  # what most file systems allow in one path segment


def clean_name(name: str) -> str:
    """``name`` without control, format or line-separator characters, whitespace runs made one
    space, at most ``MAX_NAME`` characters; ``""`` when nothing visible is left."""
    return one_line(name, MAX_NAME)
