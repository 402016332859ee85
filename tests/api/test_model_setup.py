"""The model set up through the API (the browser wizard's routes): tried, refused with the reason, kept
with the key encrypted, applied without a restart and again at the next start; a model configured in
config.yaml wins; only the operator may do it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.testing import message
from tests.api.rig import operator, person, signed_in
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-setup-test-key-42"
Daemon = Callable[..., AbstractAsyncContextManager[Gateway]]


async def test_model_set_up_tried_kept_applied_and_restored(make_daemon: Daemon) -> None:
    async with FakeOpenAI(api_key=KEY) as fake:
        settings: dict[str, Any] = {"provider": "compatible", "base_url": fake.url, "api_key": KEY}
        # A role config.yaml sets (here transcription) stays as it is through the set-up.
        heard = {"provider": "openai", "base_url": fake.url, "api_key": KEY, "model": "whisper-1"}
        async with make_daemon(llm={"provider": "anthropic", "roles": {"transcription": heard}}) as gw:
            op = operator(gw)
            status, state = await op.get("/api/setup/model")
            assert status == 200 and state == {"configured": False, "provider": "none", "model": "", "source": "none"}
            # Only the operator: a person signed in gets 403.
            alice = await person(gw, "alice")
            client = await signed_in(gw, alice)
            status, _ = await client.call("POST", "/api/setup/model/test", settings)
            assert status == 403
            await client.close()

            # Tried without keeping: a wrong key, a missing URL, then the server's models.
            status, trial = await op.call("POST", "/api/setup/model/test", {**settings, "api_key": "sk-wrong"})
            assert status == 200 and trial["ok"] is False and trial["message"]
            status, trial = await op.call("POST", "/api/setup/model/test", {**settings, "base_url": ""})
            assert trial["ok"] is False and "URL" in trial["message"]
            status, trial = await op.call("POST", "/api/setup/model/test", {"provider": "anthropic", "api_key": ""})
            assert trial["ok"] is False and "key" in trial["message"]
            status, trial = await op.call("POST", "/api/setup/model/test", settings)
            assert trial["ok"] is True and trial["models"] == ["fake-gpt", "fake-mini", "whisper-1"], trial
            assert not gw.model_ready and not (Path(gw.config.data_dir) / "setup").exists()
            status, _ = await op.call("POST", "/api/setup/model", settings)
            assert status == 400  # no model chosen

            # Kept and applied: the next turn is answered by it, no restart.
            fake.enqueue("OK")  # the save tries the model once more
            status, state = await op.call("POST", "/api/setup/model", {**settings, "model": "fake-mini"})
            assert status == 200 and state == {"configured": True, "provider": "openai", "model": "fake-mini",
                                               "source": "browser"}, state
            fake.enqueue("answered by the new model")
            reply = await gw.handle_inbound(message("hello", account="alice"))
            assert reply is not None and reply.text == "answered by the new model"
            assert fake.requests[-1]["model"] == "fake-mini"
            assert gw.config.llm.role("transcription").model == "whisper-1"
            assert not _files_holding(Path(gw.config.data_dir), KEY)
            await op.close()

        # The next start runs with it too.
        async with make_daemon(llm={"provider": "anthropic"}) as gw:
            assert gw.model_ready and gw.config.llm.model == "fake-mini"
            fake.enqueue("still here")
            reply = await gw.handle_inbound(message("hello again", account="alice"))
            assert reply is not None and reply.text == "still here"

        # A model named in config.yaml wins over the browser's.
        async with make_daemon(llm={"provider": "echo"}) as gw:
            assert gw.llm().name == "echo"
            op = operator(gw)
            status, state = await op.get("/api/setup/model")
            assert state["configured"] is True and state["source"] == "config"
            await op.close()


def _files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


async def test_settings_no_client_could_use_are_a_clear_400(gw: Gateway) -> None:
    """What schemathesis sent (a base URL of control characters, a model name of them) was a 500: the
    SDK's URL parser raised. Each bad field is refused by name, nothing is kept, nothing applied."""
    op = operator(gw)
    before = gw.config.llm
    fuzzed = {"api_key": "x", "provider": "compatible", "model": "\u0099\u00124\u00a5\u00de",
              "base_url": "\u001b\u0086\u00a0-g"}
    good = {"api_key": "x", "provider": "compatible", "model": "fake-mini", "base_url": "http://127.0.0.1:1/v1"}
    cases = [
        (fuzzed, "model name"),
        ({**good, "base_url": fuzzed["base_url"]}, "URL"),
        ({**good, "base_url": "http://[::1/v1"}, "URL"),  # httpx.InvalidURL, not a ValueError
        ({**good, "base_url": "127.0.0.1:11434/v1"}, "http://"),
        ({**good, "api_key": "sk-\u00e9\u001b"}, "API key"),
    ]
    for body, word in cases:
        status, err = await op.call("POST", "/api/setup/model", body)
        assert (status, err.get("error")) == (400, "invalid"), (body, status, err)
        assert word in err["message"], (word, err)
        status, trial = await op.call("POST", "/api/setup/model/test", body)
        assert status == 200 and trial["ok"] is False and word in trial["message"], (body, status, trial)
    assert gw.config.llm is before and not (Path(gw.config.data_dir) / "setup").exists()
    await op.close()
