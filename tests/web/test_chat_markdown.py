"""The chat page renders replies as Markdown, safely (headless Chromium, phone and desktop)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import T, browser, open_chat  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser
SIZES = ["desktop", "phone"]

RICH = """Here is the plan:

- pack the **tent**
- buy `gas`

| day | place |
|-----|-------|
| Mon | Oslo  |
| Tue | Bergen |

> Travel light.

```python
print("hi <b>there</b>")
```

See [the map](https://example.org/map) or https://example.org/ferry."""

# Everything here must stay inert text: the flag must never be set by anything on the page.
MALICIOUS = """<img src=x onerror="window.__pwned='img'">

<script>window.__pwned='script'</script>

[click me](javascript:window.__pwned='link')
[sneaky](JaVaScRiPt:window.__pwned='link2')
[data](data:text/html,<script>window.__pwned='data'</script>)
[encoded](&#x6A;avascript:window.__pwned='entity')
[tab](java	script:window.__pwned='tab')
<javascript:window.__pwned='autolink'>
[daemon](/api/session/logout) [frag](#x) [other](ftp://example.org/)

[ref][evil]

[evil]: javascript:window.__pwned='reference'
![pic](javascript:window.__pwned='image')
<a href="javascript:window.__pwned='raw-a'">raw anchor</a>
<svg onload="window.__pwned='svg'"></svg>
<iframe src="javascript:window.__pwned='iframe'"></iframe>

```html
<img src=x onerror="window.__pwned='code'"><script>window.__pwned='code-script'</script>
```

Inline `<img src=x onerror=window.__pwned='inline'>` too."""


async def test_markdown_reply_renders_lists_tables_code_links_quotes(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    # each size is a person of its own, from an empty conversation
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    for size in SIZES:  # one gateway, a desktop and a phone browser in turn
        fake_anthropic.chunk_delay_s = 0.02
        fake_anthropic.enqueue(RICH)
        chat = await open_chat(browser, gw, size, client_id=f"web-markdown_reply_rende-{size}")
        bubble = await chat.reply_after("what is the plan?")
        assert await bubble.locator("ul > li").count() == 2
        assert await bubble.locator("strong").inner_text() == "tent"
        assert await bubble.locator("table tr").count() == 3
        assert await bubble.locator("blockquote").inner_text() == "Travel light."
        code = bubble.locator(".code pre code")
        assert (await code.inner_text()).strip() == 'print("hi <b>there</b>")'
        assert await bubble.locator(".code button.copy").count() == 1
        links = bubble.locator("a")
        assert await links.count() == 2
        for i in range(2):
            link = links.nth(i)
            assert await link.get_attribute("target") == "_blank"
            assert await link.get_attribute("rel") == "noopener noreferrer"
            assert (await link.get_attribute("href") or "").startswith("https://example.org/")
        # The person's own message is shown as typed, never rendered.
        assert await chat.page.locator(".msg.me").inner_text() == "what is the plan?"
        await chat.shot("markdown")
        # Copy puts the code on the clipboard (loopback is a secure context).
        await chat.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await bubble.locator(".code button.copy").click()
        await chat.page.wait_for_selector(".code button.copy:text('Copied')", timeout=T)
        assert await chat.page.evaluate("navigator.clipboard.readText()") == 'print("hi <b>there</b>")\n'
        assert not chat.errors, chat.errors


async def test_malicious_reply_executes_nothing(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    for size in SIZES:  # one gateway, a desktop and a phone browser in turn
        fake_anthropic.chunk_delay_s = 0.01  # streamed: each partial rendering is sanitized too
        fake_anthropic.enqueue(MALICIOUS)
        chat = await open_chat(browser, gw, size, client_id=f"web-malicious_reply_exec-{size}")
        page = chat.page
        bubble = await chat.reply_after("show me something")
        assert await page.evaluate("window.__pwned") is None
        dom = page.locator("#log")
        for selector in ["img", "script", "svg", "iframe", "[onerror]", "[onload]", "a[href^='javascript' i]",
                         "a[href^='data' i]"]:
            assert await dom.locator(selector).count() == 0, selector
        # The HTML inside code is shown as text, verbatim.
        code = await bubble.locator("pre code").inner_text()
        assert "<img src=x onerror=" in code and "<script>" in code
        assert "<img src=x onerror=window.__pwned='inline'>" in await bubble.inner_text()
        # No link survives that goes anywhere but http(s)/mailto; clicking whatever is left does nothing.
        for href in await bubble.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))"):
            assert href is None or href.startswith(("https:", "http:", "mailto:")), href
        assert "click me" in await bubble.inner_text()
        # Links markdown-it lets through but that point into the daemon or at other schemes lose their href.
        assert await bubble.locator("a.dead-link").all_inner_texts() == ["daemon", "frag", "other"]
        anchors = bubble.locator("a")
        for i in range(await anchors.count()):
            await anchors.nth(i).click()
        assert await page.evaluate("window.__pwned") is None
        assert len(page.context.pages) == 1  # nothing opened a window
        await chat.shot("malicious")
        assert not [e for e in chat.errors if "pwned" in e], chat.errors
