"""``kith memory``, ``kith sessions`` and ``kith bench locomo|recall-scale`` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.memory.files.store import MemoryStore

LOCOMO_DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo-dev.json"


@pytest.fixture
def config(tmp_path: Path) -> str:
    data = tmp_path / "data"
    store = MemoryStore(data / "users" / "alice")
    store.write("USER.md", "# Alice\n\nAlice's cat is called Miso.\n", source="test")
    store.append(
        "sessions/2024-05-03.md",
        "# Sessions 2024-05-03\n\n## 10:00:05 · web · session abcd · turn t2\n\n**Alice:** We hiked up Ben Nevis"
        " today.\n\n**assistant:** What a climb!\n",
        source="test",
    )
    MemoryStore(data / "users" / "bob").write("USER.md", "# Bob\n\nBob's cat is Felix.\n", source="test")
    cfg = tmp_path / "config.yaml"
    # A port of its own: with the default (8765) a daemon running on this machine would be asked.
    cfg.write_text(f"data_dir: {data}\nserver: {{port: {_free_port()}}}\n")
    return str(cfg)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_reindex_stats_search(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "-c", config, "memory", "reindex", "--json")
    assert code == 0 and json.loads(out)["user:alice"]["embedded"] == 2
    code, out = run(capsys, "-c", config, "memory", "stats", "--json")
    stats = json.loads(out)
    assert stats["points"] == 3 and stats["scopes"]["user:bob"]["points"] == 1
    code, out = run(capsys, "-c", config, "memory", "search", "--user", "alice", "--json", "what", "is", "the", "cat")
    hits = json.loads(out)
    assert code == 0 and hits[0]["source"] == "USER.md" and "Felix" not in out
    code, out = run(capsys, "-c", config, "memory", "search", "--user", "alice", "--k", "1", "cat")
    assert code == 0 and "Miso" in out


def test_sessions_search_groups_by_date_and_highlights(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "-c", config, "memory", "reindex")
    code, out = run(capsys, "-c", config, "sessions", "search", "--user", "alice", "--color", "never", "hiking")
    assert code == 0
    assert out.splitlines()[0] == "2024-05-03"
    assert "10:00 Alice (web): We **hiked** up Ben Nevis" in out
    code, out = run(capsys, "-c", config, "sessions", "search", "--user", "alice", "--exact", "Ben N[a-z]+")
    assert code == 0 and "**Ben Nevis**" in out


def test_bad_user_is_a_clear_error(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-c", config, "memory", "search", "--user", "../bob", "cat"]) == 2
    assert "invalid memory scope" in capsys.readouterr().err


def _tiny_locomo(path: Path) -> None:
    conv = {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a greyhound called Pixel."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I started learning the cello."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "Work is busy.", "blip_caption": "a photo of a desk"},
            ],
            "session_2_date_time": "10:00 am on 9 June, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "My cello teacher moved to Leeds."}],
        },
        "qa": [
            {"question": "What is the name of Ann's dog?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument does Ben play?", "answer": "cello", "evidence": ["D1:2; D2:01"],
             "category": 1},
            {"question": "Adversarial", "answer": "", "evidence": ["D1:3"], "category": 5},
        ],
    }  # fmt: skip
    path.write_text(json.dumps([conv]))


def test_bench_locomo_prints_the_json_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "tiny.json"
    _tiny_locomo(data)
    code, out = run(capsys, "bench", "locomo", "--data", str(data))
    last = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and last["n"] == 2
    assert {"frac@5", "frac@10", "p95_ms", "n", "per_category", "ingest_turns_per_s"} <= set(last)
    assert last["frac@5"] == 100.0 and last["overall"]["mrr@1"] == 100.0


def test_evidence_normalisation() -> None:
    from bench.locomo import normalise_evidence

    assert normalise_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D8:6"]) == ["D8:6", "D9:17", "D11:26", "D30:5"]


def test_bench_recall_scale_small(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "bench", "recall-scale", "--memories", "2000", "--queries", "20", "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and result["points_total"] == 2400 and result["p95_ms"] > 0


@pytest.mark.soak
@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="LoCoMo dev data not present")
def test_bench_locomo_dev_beats_bm25(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "bench", "locomo", "--data", str(LOCOMO_DEV), "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and result["frac@5"] >= 54.3 and result["frac@10"] >= 60.2


def test_busy_index_is_reported(config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.memory.search.index_edge import EdgeIndex

    holder = EdgeIndex(tmp_path / "data" / "qdrant" / "edge-minilm-l6-int8", dim=384)
    try:
        assert main(["-c", config, "memory", "search", "--user", "alice", "cat"]) == 3
        assert "in use by another process" in capsys.readouterr().err
    finally:
        holder.close()



def test_index_one_file_and_one_conversation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 004: ``kith memory index file PATH`` and ``kith memory index conversation ID``."""
    from datetime import UTC, datetime

    from gateway.state import TranscriptEntry, open_state

    data = tmp_path / "data"
    store = MemoryStore(data / "users" / "alice")
    store.write("topics/tea.md", "# Tea\n\nAlice drinks lapsang souchong.\n", source="test")
    # A conversation whose one turn fell on 4 May in Berlin (23:30 UTC on the 3rd): its log is that day's.
    at = datetime(2024, 5, 3, 23, 30, tzinfo=UTC)
    state = open_state(data / "state.sqlite")
    state.users.create("alice", display_name="Alice", timezone="Europe/Berlin", at=at)
    state.sessions.create("s1", user_id="alice", scope_key="user:alice", conversation_key="websocket:alice",
                          persona="kith", at=at)
    state.turns.append(TranscriptEntry(turn_id="t9", session_id="s1", user_id="alice", role="user",
                                       content="The kettle broke.", channel="websocket",
                                       conversation_key="websocket:alice", speaker="Alice", created_at=at))
    state.close()
    store.append("sessions/2024-05-04.md", "# Sessions 2024-05-04\n\n## 01:30:00 · websocket · session s1 · turn t9"
                 "\n\n**Alice:** The kettle broke.\n", source="test")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"data_dir: {data}\nserver: {{port: {_free_port()}}}\n")
    code, out = run(capsys, "-c", str(cfg), "memory", "index", "file", "--user", "alice", "--json", "topics/tea.md")
    assert code == 0 and json.loads(out)["user:alice/topics/tea.md"]["embedded"] == 1
    code, out = run(capsys, "-c", str(cfg), "memory", "index", "conversation", "s1", "--json")
    assert code == 0 and list(json.loads(out)) == ["user:alice/sessions/2024-05-04.md"]
    code, out = run(capsys, "-c", str(cfg), "memory", "search", "--user", "alice", "--json", "kettle", "lapsang")
    assert {h["source"] for h in json.loads(out)} == {"topics/tea.md", "sessions/2024-05-04.md"}
    assert main(["-c", str(cfg), "memory", "index", "conversation", "nope"]) == 2


def test_search_filters_on_topic_entity_and_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 004: topic and entities are index payload fields; ``--topic/--entity/--since`` filter on them."""
    data = tmp_path / "data"
    store = MemoryStore(data / "users" / "alice")
    store.write("memories/2024-05-01.md", "# Memories 2024-05-01\n\n## Night of 2024-05-01T03:00\n"
                "Topics: moving, family\nEntities: Hanna, Munich\n\n"
                "- Alice is moving to Munich; her sister Hanna helps.\n", source="test")
    store.write("memories/2024-05-03.md", "# Memories 2024-05-03\n\n## Night of 2024-05-03T03:00\nTopics: cooking\n"
                "Entities: Sam\n\n- Alice cooked a Munich-style dinner for Sam.\n", source="test")
    store.write("topics/elden-ring.md", "# Elden Ring\n\nAlice plays it on Sundays in Munich.\n", source="test")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"data_dir: {data}\nserver: {{port: {_free_port()}}}\n")
    assert main(["-c", str(cfg), "memory", "reindex"]) == 0
    capsys.readouterr()

    def sources(*flags: str) -> set[str]:
        code, out = run(capsys, "-c", str(cfg), "memory", "search", "--user", "alice", "--json", *flags, "Munich")
        assert code == 0
        return {h["source"] for h in json.loads(out)}

    assert sources() == {"memories/2024-05-01.md", "memories/2024-05-03.md", "topics/elden-ring.md"}
    assert sources("--topic", "cooking") == {"memories/2024-05-03.md"}
    assert sources("--topic", "Elden Ring") == {"topics/elden-ring.md"}  # a topic file is about its slug
    assert sources("--entity", "hanna") == {"memories/2024-05-01.md"}
    assert sources("--since", "2024-05-02") == {"memories/2024-05-03.md"}  # undated files have no date
    code, out = run(capsys, "-c", str(cfg), "memory", "search", "--user", "alice", "--entity", "Sam", "dinner")
    assert code == 0 and "topic=cooking entities=sam" in out
    assert main(["-c", str(cfg), "memory", "search", "--user", "alice", "--since", "May", "x"]) == 2
