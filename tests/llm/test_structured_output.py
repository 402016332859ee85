"""Structured output (issue 28): a request's ``response_format`` goes out as the provider's way to a
JSON answer of a schema, through the real SDKs against the wire fakes; the memory stages' parsers read
that JSON, and the text they parsed before stays the fallback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.configread import parse_config
from gateway.llm.anthropic import AnthropicProvider
from gateway.llm.openai import OpenAIProvider
from gateway.memory.background import schemas
from gateway.memory.background.model_output import parse_extraction, parse_writer_output
from gateway.memory.background.sleep import parse_curation
from gateway.types import ContextSection, HistoryMessage, LLMRequest
from tests.fakes.anthropic import API_KEY as ANTHROPIC_KEY
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai_server import API_KEY, FakeOpenAI

NIGHT = {"memories": ["Ada plans to sail to Copenhagen in May."],
         "facts": [{"subject": "user", "predicate": "plans_trip_to", "object": "Copenhagen"}],
         "topics": [{"topic": "sailing", "weight": 0.9}]}  # fmt: skip
SECTIONS = "MEMORIES:\n- Ada plans to sail to Copenhagen in May.\nFACTS:\n[]\nTOPICS:\n{\"sailing\": 0.9}\n"


def request(fmt: Any = schemas.EXTRACTION) -> LLMRequest:
    return LLMRequest(system=(ContextSection(source="sleep_cycle", title="", text="You consolidate a day."),),
                      messages=(HistoryMessage(role="user", content="THE DAY'S CONVERSATIONS: ..."),), stream=False,
                      role="cheap", response_format=fmt)  # fmt: skip


def openai(fake: FakeOpenAI, **caps: Any) -> OpenAIProvider:
    cfg = parse_config({"llm": {"provider": "openai", "api_key": API_KEY, "base_url": fake.url, "model": "fake-gpt",
                                "max_retries": 0, "capabilities": caps}}, env={})  # fmt: skip
    return OpenAIProvider(cfg.llm)


async def test_openai_compatible_asks_for_the_json_schema_and_the_stage_reads_the_object(
    fake_openai: FakeOpenAI,
) -> None:
    p = openai(fake_openai)
    fake_openai.enqueue(json.dumps(NIGHT))
    response = await p.complete(request())
    await p.close()
    sent = fake_openai.requests[-1]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "night_memory"
    assert sent["json_schema"]["schema"]["required"] == ["memories", "facts", "topics"]
    got = parse_extraction(response.text)
    assert got.memories == ("Ada plans to sail to Copenhagen in May.",) and got.errors == ()
    assert [f.object for f in got.facts] == ["Copenhagen"] and got.topics == {"sailing": 0.9}


async def test_a_server_refusing_response_format_is_asked_again_without_it_and_then_never(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.refuse_response_format = True
    p = openai(fake_openai)
    fake_openai.enqueue(SECTIONS)
    fake_openai.enqueue(SECTIONS)
    first = await p.complete(request())
    second = await p.complete(request())
    await p.close()
    assert [("response_format" in r) for r in fake_openai.requests] == [False, False]  # the 400s are not kept
    assert p.no_structured_output
    assert parse_extraction(first.text).memories == parse_extraction(second.text).memories != ()


@pytest.mark.parametrize("status", [500, 422])
async def test_a_llama_cpp_python_server_gets_the_schema_as_json_object_from_then_on(
    fake_openai: FakeOpenAI, status: int
) -> None:
    """llama-cpp-python's server validates ``response_format.type`` against text and json_object (its
    validation error is a 500 naming the field; a plain FastAPI server's a 422) and constrains the
    answer by the ``schema`` beside json_object: asked that way after the first refusal, and for every
    later call without a refusal first."""
    fake_openai.response_format_types = ("text", "json_object")
    fake_openai.response_format_status = status
    p = openai(fake_openai)
    fake_openai.enqueue(json.dumps(NIGHT))
    fake_openai.enqueue(json.dumps(NIGHT))
    first = await p.complete(request())
    second = await p.complete(request())
    await p.close()
    sent = [r["response_format"] for r in fake_openai.requests]  # the 422 is not kept
    assert sent == [{"type": "json_object", "schema": dict(schemas.EXTRACTION.schema)}] * 2
    assert not p.no_structured_output
    assert parse_extraction(first.text).memories == parse_extraction(second.text).memories == tuple(NIGHT["memories"])


async def test_structured_output_off_sends_none(fake_openai: FakeOpenAI) -> None:
    p = openai(fake_openai, structured_output=False)
    fake_openai.enqueue(SECTIONS)
    response = await p.complete(request())
    await p.close()
    assert "response_format" not in fake_openai.requests[-1]
    assert parse_extraction(response.text).memories  # the labelled sections, as before


async def test_anthropic_forces_a_tool_of_the_schema_and_answers_with_its_input(fake_anthropic: FakeAnthropic) -> None:
    cfg = parse_config({"llm": {"api_key": ANTHROPIC_KEY, "base_url": fake_anthropic.base_url, "max_retries": 0}},
                       env={})  # fmt: skip
    p = AnthropicProvider(cfg.llm)
    notes = {"summary": "Ada plans a trip.", "people": [{"slug": "websocket-ada", "ops": [
        {"op": "append", "section": "Places", "text": "Sails to Copenhagen in May."}]}], "topics": []}
    fake_anthropic.enqueue(json.dumps(notes), kind="turn")
    fake_anthropic.enqueue("Sorry, I can only answer in prose.", kind="turn")
    structured = await p.complete(request(schemas.WRITER))
    prose = await p.complete(request(schemas.WRITER))
    await p.close()
    body = fake_anthropic.requests[0]
    assert [t["name"] for t in body["tools"]] == ["memory_notes"]
    assert body["tool_choice"] == {"type": "tool", "name": "memory_notes"}
    assert body["tools"][0]["input_schema"] == dict(schemas.WRITER.schema)
    out = parse_writer_output(structured.text)
    assert structured.stop_reason == "end_turn" and out.summary == "Ada plans a trip." and out.errors == ()
    assert out.people[0].slug == "websocket-ada" and out.people[0].ops is not None
    # A model that answers in text anyway: the text, for the tolerant parser (which says what is missing).
    assert prose.text == "Sorry, I can only answer in prose."
    assert "section SUMMARY missing" in parse_writer_output(prose.text).errors


def test_the_parsers_read_both_shapes_and_fall_back_on_a_cut_object() -> None:
    ops = {"ops": [{"op": "append", "section": "Work", "text": "Sails."}], "patterns": []}
    assert parse_curation(json.dumps(ops))[0] == ops["ops"]
    cut = json.dumps(NIGHT)[:40]  # a structured answer cut off: no object, so the sections parser says why
    got = parse_extraction(cut)
    assert got.empty and "section MEMORIES missing" in got.errors
    assert parse_extraction("```json\n" + json.dumps(NIGHT) + "\n```").memories  # fenced is fine
    assert parse_extraction(json.dumps({"topics": {"sailing": 1}, "memories": ["x y z"]})).topics == {"sailing": 1.0}
