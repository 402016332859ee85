"""Ranking steps after fusion: speaker and date signals of the query, session diversity, and the
leave-one-out search of the LoCoMo benchmark (on made-up candidates: no model, no index)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from bench.locomo import Question, leave_one_out, score
from gateway.memory.search.index import Candidate
from gateway.memory.search.recall import Query, RecallSettings, Retrieved, boost, diversify, rank
from tests.memory.conftest import ServiceFactory
from tests.memory.test_recall import NOW

AT = NOW.timestamp()
# Fusion alone, to see one step at a time.
OFF = RecallSettings(dense_weight=0.5, sparse_weight=0.5, neighbor_weight=0.0, half_life_days=0.0, speaker_weight=0.0,
                     date_weight=0.0, diversity=0.0)


def turn(cid: str, score: float, *, speaker: str = "", session: str = "s1", ts: float = AT - 86400 * 30) -> Candidate:
    return Candidate(cid, score, {"speaker": speaker, "session": session, "ts": ts})


def found(query: str, dense: list[Candidate], bm25: list[Candidate] | None = None, tz: str | None = None) -> Retrieved:
    return Retrieved(dense, bm25 or [], Query.parse(query, AT, tz), AT)


def ids(top: list[tuple[float, str, dict]]) -> list[str]:  # type: ignore[type-arg]
    return [cid for _s, cid, _p in top]


def test_a_named_speakers_turn_is_lifted() -> None:
    dense = [turn("caroline", 1.0, speaker="Caroline"), turn("melanie", 0.8, speaker="Melanie"),
             turn("floor", 0.0, speaker="Caroline")]  # fmt: skip
    q = found("What did Melanie's kids like?", dense)
    assert ids(rank(q, k=3, settings=OFF)) == ["caroline", "melanie", "floor"]
    lifted = rank(q, k=3, settings=dataclasses.replace(OFF, speaker_weight=0.4))
    assert ids(lifted) == ["melanie", "caroline", "floor"]
    assert abs(lifted[0][0] - (0.5 * 0.8 + 0.4)) < 1e-9  # fused 0.4 (dense weight 0.5 x 0.8) + 0.4
    # Not named: no change; a name part of two letters never counts ("Al" in "al fresco").
    unnamed = found("what did the kids like", dense)
    assert ids(rank(unnamed, k=3, settings=dataclasses.replace(OFF, speaker_weight=0.4))) == ids(
        rank(q, k=3, settings=OFF))
    short = [turn("x", 1.0, speaker="Bo"), turn("al", 0.9, speaker="Al Smith")]
    assert ids(rank(found("dinner al fresco with bo", short), k=2,
                    settings=dataclasses.replace(OFF, speaker_weight=1.0))) == ["x", "al"]
    # A full name matches on any of its parts.
    assert ids(rank(found("what did smith say", short), k=2,
                    settings=dataclasses.replace(OFF, speaker_weight=1.0))) == ["al", "x"]


def test_a_memory_dated_in_the_named_time_is_lifted_on_the_persons_calendar() -> None:
    # NOW is 2025-01-01 00:00 UTC: in Tokyo it is already 09:00 on 1 January, in New York still 31 December.
    dec31 = datetime(2024, 12, 31, 10, tzinfo=UTC).timestamp()  # Tokyo: 19:00 yesterday; New York: 05:00 today
    dense = [turn("older", 1.0, ts=AT - 86400 * 9), turn("dec31", 0.9, ts=dec31), turn("floor", 0.0)]
    s = dataclasses.replace(OFF, date_weight=0.3)
    assert ids(rank(found("what did I say yesterday", dense, tz="Asia/Tokyo"), k=2, settings=s)) == ["dec31", "older"]
    assert ids(rank(found("what did I say yesterday", dense, tz="America/New_York"), k=2, settings=s)) == [
        "older", "dec31"]
    # Undated memories (people/, topics/) are never inside a range.
    fused = {"file": (0.5, {"ts": 0.0}), "dated": (0.5, {"ts": dec31})}
    out = boost(fused, Query.parse("yesterday", AT, "Asia/Tokyo"), s)
    assert out["file"][0] == 0.5 and abs(out["dated"][0] - 0.8) < 1e-9


def test_session_diversity_spreads_but_keeps_the_best_first() -> None:
    scored = [(1.0, "a1", {"session": "A"}), (0.9, "a2", {"session": "A"}), (0.8, "a3", {"session": "A"}),
              (0.7, "b1", {"session": "B"}), (0.6, "file", {})]  # fmt: skip
    assert ids(diversify(scored, 5, 0.0)) == ["a1", "a2", "a3", "b1", "file"]
    # a2 drops to 0.9 - 0.25 = 0.65 once a1 is in: b1 (0.7) goes ahead; a3 = 0.8 - 0.5 falls behind the file.
    assert ids(diversify(scored, 5, 0.25)) == ["a1", "b1", "a2", "file", "a3"]
    assert ids(diversify(scored, 2, 10.0)) == ["a1", "b1"]
    # Scores are reported as ranked, not as penalised.
    assert [s for s, _c, _p in diversify(scored, 5, 0.25)] == [1.0, 0.7, 0.9, 0.6, 0.8]


def test_signals_off_rank_exactly_as_fusion_neighbours_and_recency() -> None:
    dense = [turn("a", 0.9, ts=AT - 86400), turn("b", 0.85, ts=AT - 86400 * 400, session="s2"),
             turn("c", 0.2, ts=AT - 86400 + 60)]  # fmt: skip
    bm25 = [turn("b", 7.0, ts=AT - 86400 * 400, session="s2"), turn("c", 1.0, ts=AT - 86400 + 60)]
    q = found("Melanie yesterday", dense, bm25)
    # The settings recall had before the query signals (issue 18), with the signals off.
    default = RecallSettings(dense_weight=0.5, sparse_weight=0.5, neighbor_weight=0.3, neighbor_window_s=300,
                             half_life_days=180, recency_weight=0.25, speaker_weight=0, date_weight=0, diversity=0)
    top = rank(q, k=3, settings=default)
    assert ids(top) == ["b", "a", "c"]
    # b: dense 0.5 x (0.85-0.2)/0.7 + BM25 0.5 x 1, no neighbour, 400 days at a 180-day half-life.
    want_b = (0.5 * 0.65 / 0.7 + 0.5) * (0.75 + 0.25 * 0.5 ** (400 / 180))
    assert abs(top[0][0] - want_b) < 1e-9
    # Candidates beyond max(``candidates``, k) per list are cut before fusion: c is in neither first place.
    assert ids(rank(q, k=1, settings=dataclasses.replace(default, candidates=1))) == ["a"]
    assert ids(rank(q, k=3, settings=dataclasses.replace(default, candidates=1))) == ["b", "a", "c"]


def test_leave_one_out_tunes_without_the_held_out_conversation() -> None:
    """Two conversations reward opposite speaker weights: each fold must choose the one its training
    conversation prefers, and so score its held-out conversation badly."""

    def question(conv: str, gold: str) -> Question:
        # Without the boost Melanie's turn is last (12th) and t-8 10th; with it, Melanie's is first
        # and pushes t-8 to 11th.
        dense = [turn("t-caroline", 1.0, speaker="Caroline"), turn("t-melanie", 0.5, speaker="Melanie")]
        dense += [turn(f"t-{i}", 0.9 - i * 0.01, speaker="Caroline") for i in range(10)]
        turns = {c.id: (c.id,) for c in dense}
        return Question(conv, 4, [gold], found("What does Melanie like?", dense), turns)

    likes_boost = [question("conv-a", "t-melanie") for _ in range(3)]
    hates_boost = [question("conv-b", "t-8") for _ in range(3)]
    blocks = [{"speaker_weight": (0.0, 0.6)}]
    result = leave_one_out(likes_boost + hates_boost, OFF, blocks)
    folds = {f["held_out"]: f for f in result["folds"]}
    assert folds["conv-a"]["chosen"] == {"speaker_weight": 0.0}  # tuned on conv-b alone
    assert folds["conv-b"]["chosen"] == {"speaker_weight": 0.6}
    assert folds["conv-a"]["frac@10"] == 0.0 and folds["conv-b"]["frac@10"] == 0.0
    assert result["frac@5"] == 0.0 and result["spread"]["frac@5"] == [0.0, 0.0]


def test_score_counts_gold_turns_in_the_first_k() -> None:
    s = score(["x", "g1", "y", "g2"] + ["z"] * 30, ["g1", "g2", "g3"])
    assert s["frac@1"] == 0.0 and abs(s["frac@5"] - 2 / 3) < 1e-9 and s["any@5"] == 1.0 and s["mrr@5"] == 0.5
    assert s["all@25"] == 0.0


async def test_service_recall_reads_dates_in_the_persons_zone_and_speakers(make_service: ServiceFactory) -> None:
    """End to end (real model and index): the same words said on two days and by two people."""
    svc = await make_service("edge", speaker_weight=0.4, date_weight=0.3, recency_half_life_days=0)
    now = datetime(2025, 3, 10, 23, 30, tzinfo=UTC)  # Tokyo: already 11 March; UTC: still 10 March
    said = [("t-1", "Ida", datetime(2025, 3, 9, 12, tzinfo=UTC)),  # UTC's yesterday
            ("t-2", "Uma", datetime(2025, 3, 10, 12, tzinfo=UTC))]  # Tokyo's yesterday  # fmt: skip
    for tid, who, ts in said:
        await svc.indexing.index_turn(scope="user:u", turn_id=tid, session_id=f"s-{tid}", channel="web", speaker=who,
                             text="we booked the ferry to Bergen", timestamp=ts)  # fmt: skip
    # Unrelated turns: fusion normalises each list between its best and worst candidate.
    for i, text in enumerate(("my tomato plants are flowering", "the printer is out of toner again")):
        await svc.indexing.index_turn(scope="user:u", turn_id=f"f-{i}", session_id="s-f", channel="web", speaker="kith",
                             text=text, timestamp=datetime(2025, 1, 5 + i, tzinfo=UTC))  # fmt: skip

    async def first(query: str, tz: str | None = None) -> tuple[str, ...]:
        return (await svc.recall(scope="user:u", query=query, k=4, now=now, tz=tz))[0].turn_ids

    assert await first("the ferry booking yesterday", "UTC") == ("t-1",)
    assert await first("the ferry booking yesterday", "Asia/Tokyo") == ("t-2",)
    assert await first("what did Ida book") == ("t-1",)
    assert await first("what did Uma book") == ("t-2",)
