"""Splitting long replies to a platform's limit, and escaping for Telegram's parse modes.

Splitting works on the text the user sees, so a split never lands inside an escape sequence or a tag:
adapters split first and render each chunk afterwards. A chunk that ends inside a fenced code block
is closed with a fence and the next chunk reopens it, so every chunk renders on its own.
"""

from __future__ import annotations

import html
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
    if not text:
        return []
    chunks: list[str] = []
    reopen = ""  # fence line to reopen at the start of the next chunk ("" = not inside a fence)
    while text:
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
        body = body.rstrip()
        if body:
            chunks.append(body)
    return chunks


# -------------------------------------------------------------------------------- Telegram MarkdownV2

_MDV2_SPECIAL = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")


def escape_markdown_v2(text: str) -> str:
    """Escape every character MarkdownV2 treats as markup, so ``text`` shows literally."""
    return _MDV2_SPECIAL.sub(r"\\\1", text)


# ------------------------------------------------------------------------------------- Telegram HTML

_CODE_BLOCK = re.compile(r"```([A-Za-z0-9_+-]*)\n?(.*?)```", re.S)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S)
_ITALIC = re.compile(r"(?<![\w*])[*_](?=\S)([^*_\n]+?)(?<=\S)[*_](?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")


def markdown_to_telegram_html(text: str) -> str:
    """Render the common Markdown a model writes as Telegram HTML; everything else is escaped.

    HTML (not MarkdownV2) because its escaping is three characters and a stray ``*`` from the model
    cannot make the whole message fail to parse. Code is extracted first so nothing inside it is
    interpreted; placeholders use a private-use character no model emits.
    """
    slots: list[str] = []

    def stash(rendered: str) -> str:
        slots.append(rendered)
        return f"\ue000{len(slots) - 1}\ue001"

    def block(m: re.Match[str]) -> str:
        lang, body = m.group(1), html.escape(m.group(2).rstrip("\n"), quote=False)
        if lang:
            return stash(f'<pre><code class="language-{lang}">{body}</code></pre>')
        return stash(f"<pre>{body}</pre>")

    out = _CODE_BLOCK.sub(block, text.replace("\ue000", "").replace("\ue001", ""))
    out = _INLINE_CODE.sub(lambda m: stash(f"<code>{html.escape(m.group(1), quote=False)}</code>"), out)

    def link(m: re.Match[str]) -> str:
        return stash(f'<a href="{html.escape(m.group(2))}">{html.escape(m.group(1), quote=False)}</a>')

    out = _LINK.sub(link, out)
    out = html.escape(out, quote=False)
    out = _BOLD.sub(r"<b>\1</b>", out)
    out = _STRIKE.sub(r"<s>\1</s>", out)
    out = _ITALIC.sub(r"<i>\1</i>", out)
    return re.sub("\ue000(\\d+)\ue001", lambda m: slots[int(m.group(1))], out)
