"""The model set-up in the browser (issue 33's acceptance): with no model configured, the operator's chat
offers the wizard; it connects to a fake OpenAI-compatible server, a chat turn then works without a
restart, and the key is in neither config.yaml nor any file of the data directory in clear (headless
Chromium at 1280 and 390 px)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.configread import load_config
from tests.fakes.openai_server import FakeOpenAI
from tests.web.chat_support import T, browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser
SIZES = ["desktop", "phone"]
KEY = "sk-wizard-0123456789abcdef"


def _config_file(tmp_path: Path, size: str) -> Path:
    path = tmp_path / f"config-{size}.yaml"
    path.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path / f"data-{size}"), "llm": {"provider": "anthropic"}, "server": {"port": 0},
        "plugins": {"entry_points": False}, "identity": {"offer_timezone": False},
    }))  # fmt: skip
    return path


async def test_the_wizard_sets_up_a_model_that_answers_without_a_restart(
    browser: Any, make_gateway: Any, tmp_path: Path  # noqa: F811
) -> None:
    async with FakeOpenAI(api_key=KEY) as fake:
        for size in SIZES:
            path = _config_file(tmp_path, size)
            before = path.read_text()
            gw = await make_gateway(config=load_config(path, env={}))
            assert not gw.model_ready
            chat = await open_chat(browser, gw, size)
            page = chat.page
            # The operator (the local owner) is offered the set-up at once.
            await page.wait_for_selector("#wizard[open]")
            assert await page.is_visible("#setup-offer")
            await chat.shot("wizard")
            await page.check("input[name=w-provider][value=compatible]")
            await page.fill("#w-url", fake.url)
            # A wrong key: the test says so, and nothing is kept.
            await page.fill("#w-key", "sk-wrong")
            await page.click("#w-test")
            await page.wait_for_selector("#w-status.bad")
            await page.fill("#w-key", KEY)
            await page.click("#w-test")
            await page.wait_for_selector("#w-status.ok")
            assert await page.input_value("#w-model") == "fake-gpt"  # the first model the server lists
            await chat.shot("wizard-tested")
            await page.click("#w-save")
            await page.wait_for_selector("#wizard:not([open])", state="attached")
            await page.wait_for_selector("#log .msg.notice >> text=The model is ready")
            assert await page.is_hidden("#setup-offer") and await page.is_hidden("#notice")
            fake.enqueue("Hello from the model you just set up.")
            bubble = await chat.reply_after("hello")
            assert "Hello from the model you just set up." in await bubble.inner_text()
            await chat.shot("wizard-done")
            assert gw.model_ready and gw.config.llm.base_url == fake.url
            # The key: not in config.yaml (untouched), and in no file of the data directory in clear.
            assert path.read_text() == before and KEY not in before
            data = Path(gw.config.data_dir)
            assert _files_holding(data, KEY) == []
            assert (data / "setup" / "model-key.enc").is_file()
            assert (data / "setup" / "model-key.enc").stat().st_mode & 0o077 == 0
            assert not chat.errors, chat.errors


def _files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]
