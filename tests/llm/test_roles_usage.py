"""Model roles on the real gateway: background jobs on the ``cheap`` role reach a different server than
``main``; every call's tokens and cost are recorded per person, role and day; a person's daily budget
stops background jobs, never their chat."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from gateway.config import ConfigError
from gateway.configread import parse_config
from gateway.llm.usage import today
from tests.background.conftest import FAST_BUS, say, user_id
from tests.background.test_writer import WRITER_OK, slot_files
from tests.fakes.openai_server import API_KEY, FakeOpenAI

PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}


def roles_llm(main: FakeOpenAI, cheap: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "api_key": API_KEY, "base_url": main.url, "model": "fake-gpt", "max_retries": 0,
            "timeout_s": 10, "prices": PRICES,
            "roles": {"cheap": {"base_url": cheap.url, "api_key": cheap.api_key, "model": "fake-mini",
                                "prices": {"input_per_mtok": 0.5, "output_per_mtok": 1.0}}}, **extra}


async def test_background_jobs_run_on_the_cheap_server(make_gateway: Any, fake_openai: FakeOpenAI,
                                                        fake_openai_cheap: FakeOpenAI) -> None:
    gw = await make_gateway(llm=roles_llm(fake_openai, fake_openai_cheap), bus=FAST_BUS,
                            background={"writer": {"turn_threshold": 2, "idle_seconds": 3600}})
    fake_openai_cheap.enqueue(WRITER_OK, kind="memory_writer")
    await say(gw, "I'm moving to Munich in June.", "Looking at flats near the Isar.")
    await gw.settle()
    uid = user_id(gw)
    assert slot_files(gw, uid), "the memory writer wrote nothing"
    assert [r["model"] for r in fake_openai.requests] == ["fake-gpt", "fake-gpt"]  # the two turns only
    [writer] = fake_openai_cheap.requests
    assert writer["model"] == "fake-mini" and "Looking at flats near the Isar." in json.dumps(writer)
    assert {k.lower(): v for k, v in fake_openai_cheap.headers[-1].items()}["authorization"] == "Bearer sk-cheap-key"
    # Usage per person, role and day, priced by each role's prices.
    rows = {r.role: r for r in gw.state.usage.rows(since_day=today(), user_id=uid)}
    assert set(rows) == {"main", "cheap"}
    main, cheap = rows["main"], rows["cheap"]
    assert main.calls == 2 and main.provider == "openai" and main.model == "fake-gpt" and main.input_tokens > 0
    assert main.cost_usd == pytest.approx((main.input_tokens * 3.0 + main.output_tokens * 15.0) / 1e6)
    assert cheap.calls == 1 and cheap.cost_usd == pytest.approx(
        (cheap.input_tokens * 0.5 + cheap.output_tokens * 1.0) / 1e6)
    assert gw.state.usage.cost_on(uid, today()) == pytest.approx(main.cost_usd + cheap.cost_usd)


async def test_budget_stops_background_jobs_not_chat(make_gateway: Any, fake_openai: FakeOpenAI,
                                                     fake_openai_cheap: FakeOpenAI,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    # Two turns cost far more than a thousandth of a cent: the budget is spent before the writer runs.
    gw = await make_gateway(llm=roles_llm(fake_openai, fake_openai_cheap, daily_budget_usd=0.00001), bus=FAST_BUS,
                            background={"writer": {"turn_threshold": 2, "idle_seconds": 3600}})
    caplog.set_level(logging.WARNING, "kith.llm.usage")
    await say(gw, "I'm moving to Munich in June.", "Looking at flats near the Isar.")
    await gw.settle()
    uid = user_id(gw)
    assert len(fake_openai.requests) == 2  # chat went on
    assert fake_openai_cheap.requests == [] and not slot_files(gw, uid)
    assert any(f"budget: memory_writer stopped for user {uid}" in r.getMessage() for r in caplog.records)
    # Another person's jobs are theirs to spend: the budget is per person.
    assert gw.state.usage.cost_on("someone-else", today()) == 0


async def test_vision_and_transcription_roles(make_gateway: Any, fake_openai: FakeOpenAI,
                                              fake_openai_cheap: FakeOpenAI) -> None:
    llm = roles_llm(fake_openai, fake_openai_cheap)
    llm["roles"]["transcription"] = {"base_url": fake_openai_cheap.url, "api_key": fake_openai_cheap.api_key,
                                     "model": "whisper-1"}
    gw = await make_gateway(llm=llm)
    from gateway.llm.base import Transcriber

    transcriber = gw.llm("transcription")
    assert isinstance(transcriber, Transcriber)
    assert await transcriber.transcribe(b"RIFF", mime_type="audio/wav", filename="a.wav") == "fake transcript"
    assert fake_openai_cheap.transcriptions[0]["model"] == "whisper-1"
    assert gw.llm("vision").name == "openai"  # defaults to main's settings


def test_unknown_role_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"background.sleep.backend: unknown model role 'tiny'"):
        parse_config({"background": {"sleep": {"backend": "tiny"}}}, env={})
    cfg = parse_config({"llm": {"roles": {"tiny": {"model": "small"}}}, "background": {"sleep": {"backend": "tiny"}}},
                       env={})
    assert cfg.llm.role("tiny").model == "small"


def test_a_role_on_another_provider_never_gets_mains_key() -> None:
    cfg = parse_config({"llm": {"api_key": "sk-ant", "roles": {
        "cheap": {"provider": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "llama"}}}}, env={})
    assert cfg.llm.role("cheap").api_key is None and cfg.llm.role("vision").api_key is not None


def test_local_provider_is_gone_with_a_pointer() -> None:
    with pytest.raises(ConfigError, match="provider: openai"):
        parse_config({"llm": {"provider": "local", "local_model_path": "/models/x.gguf"}}, env={})
