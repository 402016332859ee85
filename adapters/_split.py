"""Rendering a reply's Markdown as Telegram HTML.

Splitting (``gateway.util.text.split_text``) works on the text the user sees, so a split never lands inside
an escape sequence or a tag: adapters split first and render each chunk afterwards.
"""

from __future__ import annotations

import html
import re

__all__ = ["markdown_to_telegram_html"]

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
