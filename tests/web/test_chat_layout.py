"""The chat page's frame (docs/web.md#layout): one header line at phone width, measured by the element
boxes; a readable column on a wide screen; the light/dark toggle, kept across a reload."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser

# Every box in the header: its top and bottom, and the header's own, in one evaluation.
BOXES = """() => {
  const header = document.querySelector('header').getBoundingClientRect();
  const items = [...document.querySelectorAll('header > *, header nav > *, header .status > *')]
    .filter((el) => el.getClientRects().length)
    .map((el) => { const r = el.getBoundingClientRect();
      return {id: el.id || el.tagName, top: r.top, bottom: r.bottom, left: r.left, right: r.right}; });
  // Boxes that overlap a sibling or stick out of their row (each row's visible boxes, left to right).
  const overlaps = [];
  for (const row of ['header', 'header nav', 'header .status']) {
    const parent = document.querySelector(row).getBoundingClientRect();
    const boxes = [...document.querySelector(row).children].filter((el) => el.getClientRects().length)
      .map((el) => [el.id || el.tagName, el.getBoundingClientRect()]).sort((a, b) => a[1].left - b[1].left);
    for (const [id, r] of boxes) {  // sticking out of its row is overlapping the next one
      if (r.left < parent.left - 0.5 || r.right > parent.right + 0.5) overlaps.push([row, id]);
    }
    for (let i = 1; i < boxes.length; i++) {
      if (boxes[i][1].left < boxes[i - 1][1].right - 0.5) overlaps.push([boxes[i - 1][0], boxes[i][0]]);
    }
  }
  return {header: {top: header.top, bottom: header.bottom, height: header.height},
          width: document.documentElement.clientWidth, scroll: document.documentElement.scrollWidth, items, overlaps};
}"""


def one_line(boxes: dict[str, Any]) -> None:
    items = boxes["items"]
    assert len(items) >= 6, items
    mids = [(i["top"] + i["bottom"]) / 2 for i in items]
    tallest = max(i["bottom"] - i["top"] for i in items)
    # One line: every box's middle within one box height of every other's, none past the right edge.
    assert max(mids) - min(mids) < tallest / 2, items
    assert boxes["header"]["height"] < 2 * tallest, boxes["header"]
    assert all(i["right"] <= boxes["width"] + 0.5 and i["left"] >= -0.5 for i in items), items
    assert boxes["scroll"] <= boxes["width"], "nothing scrolls sideways"
    assert not boxes["overlaps"], boxes["overlaps"]


@pytest.mark.parametrize("size", ["phone", "desktop"])
async def test_header_is_one_line_and_the_column_is_bounded(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], size: str,  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    chat = await open_chat(browser, gw, size, client_id=f"web-layout-{size}")
    page = chat.page
    # A long name is the worst case for the phone's header: the chip gives way, nothing wraps.
    await page.evaluate("document.getElementById('person-name').textContent = 'Alexandra Konstantinopoulou'")
    boxes = await page.evaluate(BOXES)
    one_line(boxes)
    # Off-The-Record adds its label to the header: still one line.
    await page.evaluate("document.getElementById('otr').hidden = false")
    one_line(await page.evaluate(BOXES))
    await chat.shot("layout-otr-label")
    await page.evaluate("document.getElementById('otr').hidden = true")
    if size == "phone":
        assert boxes["width"] == 390
        # The labels become icons; they keep their names for screen readers.
        assert await page.get_by_role("button", name="History").is_visible()
        assert await page.get_by_role("link", name="Memory").is_visible()
    fake_anthropic.enqueue("A reply long enough to fill the column. " * 4)
    await chat.reply_after("How wide is a line? " * 6)
    # On a wide screen the conversation keeps a column of at most 54rem (864 px), centred.
    log = await page.evaluate("""() => { const log = document.getElementById('log'); const s = getComputedStyle(log);
        return {inner: log.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight),
                left: parseFloat(s.paddingLeft), right: parseFloat(s.paddingRight)}; }""")
    if size == "desktop":
        assert log["inner"] <= 864.5 and abs(log["left"] - log["right"]) < 20, log
    else:
        assert log["inner"] > 340, log
    await chat.shot("layout")
    # The other theme, for the screenshots (the toggle itself: the test below).
    await page.click("#theme-btn")
    if size == "desktop":
        await page.click("#theme-btn")
    assert await page.evaluate("document.documentElement.dataset.theme") == ("dark" if size == "desktop" else "light")
    one_line(await page.evaluate(BOXES))
    await chat.shot("layout-other-theme")
    assert not chat.errors, chat.errors


async def test_theme_toggle_switches_and_is_remembered(
    browser: Any, make_gateway: Any,  # noqa: F811
) -> None:
    gw = await make_gateway()
    chat = await open_chat(browser, gw, "phone", client_id="web-theme")  # the phone's system theme is dark
    page = chat.page
    bg = "getComputedStyle(document.body).backgroundColor"
    assert await page.evaluate(bg) == "rgb(20, 20, 20)"
    assert await page.get_attribute("#theme-btn", "aria-label") == "Theme: as the system"
    await page.click("#theme-btn")
    assert await page.evaluate("document.documentElement.dataset.theme") == "light"
    assert await page.evaluate(bg) == "rgb(247, 247, 245)"
    await chat.shot("theme-light")
    await page.click("#theme-btn")
    assert await page.evaluate(bg) == "rgb(20, 20, 20)"
    assert await page.get_attribute("#theme-btn", "aria-label") == "Theme: dark"
    await page.click("#theme-btn")  # back to the system's
    assert await page.evaluate("document.documentElement.dataset.theme") is None
    assert await page.evaluate("localStorage.getItem('kith.theme')") is None
    await page.click("#theme-btn")
    # Kept across a reload (theme.js puts it on <html> before the style sheet applies).
    await page.reload()
    assert await page.evaluate("document.documentElement.dataset.theme") == "light"
    await page.wait_for_selector("#conn.on")
    assert await page.evaluate(bg) == "rgb(247, 247, 245)"
    assert await page.get_attribute("#theme-btn", "aria-label") == "Theme: light"
    await wait_until(page, "document.readyState === 'complete'")
    assert not chat.errors, chat.errors
