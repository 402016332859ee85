"""``kith bench locomo --qa`` end to end on two questions: the ``main`` role (a fake OpenAI-compatible
server) answers from the recalled context and from the whole conversation, the ``judge`` role (another
fake) grades under the published protocol, and the report has J, F1 and BLEU-1 by category and prompt
tokens per question; a second run resumes from the answers file and asks nothing again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from bench.locomo_qa import bleu1, f1, label_of
from gateway.cli.main import main as kith
from tests.fakes.openai_server import API_KEY, FakeOpenAI

CONVERSATION = [{
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ada", "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ada", "dia_id": "D1:1", "text": "I ran my first half marathon yesterday!"},
                      {"speaker": "Ben", "dia_id": "D1:2", "text": "Congratulations! How did it go?"}],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [{"speaker": "Ada", "dia_id": "D2:1", "text": "Next month I am moving to Paris for work."},
                      {"speaker": "Ben", "dia_id": "D2:2", "text": "Paris! That is exciting."}],
    },
    "qa": [{"question": "When did Ada run her first half marathon?", "answer": "7 May 2023", "evidence": ["D1:1"],
            "category": 2},
           {"question": "Where is Ada moving?", "answer": "Paris", "evidence": ["D2:1"], "category": 4},
           {"question": "Where is Ben moving?", "adversarial_answer": "Rome", "evidence": [], "category": 5}],
}]  # fmt: skip


def test_scores() -> None:
    assert f1("on 7 May 2023", "7 May 2023") == pytest.approx(2 * 0.75 * 1 / 1.75)
    assert bleu1("Paris", "Paris") == 1.0 and bleu1("", "Paris") == 0.0
    assert label_of('{"reasoning": "same city", "label": "CORRECT"}') == "CORRECT"
    assert label_of("I think this is WRONG.") == "WRONG" and label_of("no idea") == "WRONG"


async def test_two_questions_against_fake_main_and_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(CONVERSATION))
    out = tmp_path / "answers.jsonl"
    async with FakeOpenAI(name="main") as main, FakeOpenAI(name="judge") as judge:
        cfg = tmp_path / "kith.yaml"
        cfg.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"), "llm": {
            "provider": "openai", "base_url": main.url, "api_key": API_KEY, "model": "fake-gpt", "max_retries": 0,
            "roles": {"judge": {"provider": "openai", "base_url": judge.url, "api_key": API_KEY,
                                "model": "fake-judge", "max_retries": 0}}}}))  # fmt: skip
        for _ in range(2):  # question 1 in both modes, then question 2 in both
            main.enqueue("7 May 2023")
        for _ in range(2):
            main.enqueue("London")
        for verdict in ("CORRECT", "CORRECT", "WRONG", "WRONG"):
            judge.enqueue(json.dumps({"reasoning": "r", "label": verdict}))
        argv = ["-c", str(cfg), "bench", "locomo", "--data", str(data), "--qa", "--out", str(out), "--questions",
                "2", "--concurrency", "1", "--json"]  # fmt: skip
        assert await asyncio.to_thread(kith, argv) == 0
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert [(r["mode"], r["label"]) for r in rows] == [
            ("memory", "CORRECT"), ("full", "CORRECT"), ("memory", "WRONG"), ("full", "WRONG")]
        memory_prompt = json.dumps(main.requests[0]["messages"])
        assert "Recalled memories" in memory_prompt and "half marathon" in memory_prompt
        assert "Session 2, 10:00 am on 20 May, 2023" in json.dumps(main.requests[1]["messages"])
        assert judge.requests[0]["response_format"]["json_schema"]["name"] == "verdict"
        assert "Gold answer: 7 May 2023" in json.dumps(judge.requests[0]["messages"])
        assert len(main.requests) == 4 and all(r["model"] == "fake-gpt" for r in main.requests)
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        for mode in ("memory", "full"):
            overall = summary[mode]["overall"]
            assert (overall["n"], overall["J"], overall["F1"]) == (2, 50.0, 50.0) and overall["prompt_tokens"] > 0
            assert summary[mode]["per_category"]["temporal"]["J"] == 100.0
            assert summary[mode]["per_category"]["single-hop"]["J"] == 0.0
        assert summary["judge_role"] == "judge"

        # Resumed: everything is in the answers file, so nothing is asked again.
        assert await asyncio.to_thread(kith, argv) == 0
        assert len(main.requests) == 4 and len(judge.requests) == 4


