"""Memory holds text other people wrote: the console renders it and executes none of it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.console_support import browser, goto_view, open_console, seed, shot

__all__ = ["browser"]
pytestmark = pytest.mark.browser

EVIL = """# Notes from the group chat

- <img src=x onerror="window.__pwned = 'img'"> harmless looking
- [click me](javascript:window.__pwned='link') and [fine](https://example.org/page)
- <script>window.__pwned = 'script'</script>
- <a href="javascript:window.__pwned='raw-a'">raw anchor</a>

```html
<img src=x onerror="window.__pwned = 'code'">
```
"""


@pytest.mark.parametrize("size", ["phone", "desktop"])
async def test_hostile_memory_text_renders_as_text_and_runs_nothing(
    size: str, browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    s = await seed(gw, fake_anthropic)
    gw.memory.stores.for_user(s.user_id).write("topics/group-chat.md", EVIL, source="test")
    await gw.settle()
    page = await open_console(browser, gw, size)
    await goto_view(page, "#/me/file/topics/group-chat.md", "harmless looking")
    doc = page.locator("article.doc")
    assert await doc.locator("img, script").count() == 0
    hrefs = await doc.locator("a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
    assert "https://example.org/page" in hrefs and not any(h and h.lower().startswith("javascript") for h in hrefs)
    safe = await doc.locator("a[href='https://example.org/page']").evaluate("a => [a.target, a.rel]")
    assert safe == ["_blank", "noopener noreferrer"]
    assert "<script>" in (await doc.text_content() or "")  # shown as the text it is
    await shot(page, f"{size}-hostile-file")
    # The same text as recall hits and quarantined lines is text too.
    await goto_view(page, "#/me/recall/harmless looking img", "harmless looking")
    assert await page.locator("#view img, #view script").count() == 0
    await page.wait_for_timeout(300)  # an onerror would fire as soon as the image failed
    assert await page.evaluate("window.__pwned") is None
    assert page.kith_errors == []
