"""Transcript search folds case and diacritics alike on both backends: SQLite's FTS5 (``unicode61
remove_diacritics 2``) and PostgreSQL's ``unaccent`` (``gateway.state.postgres.fulltext``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.state import State, TranscriptEntry
from gateway.state.words import MAX_QUERY_WORDS, query_words

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TEXTS = ["We met at the Café Müller", "Crème brûlée for dessert", "nothing to see"]


def _fill(state: State) -> list[str]:
    state.users.create("u1", display_name="U1", timezone="UTC", at=T0)
    sessions = []
    for i, text in enumerate(TEXTS):
        sid = f"s{i}"
        state.sessions.create(sid, user_id="u1", scope_key="user:u1", conversation_key="web:u1",
                              persona="default", at=T0 + timedelta(minutes=i))  # fmt: skip
        state.turns.append(TranscriptEntry(turn_id=f"t{i}", session_id=sid, user_id="u1", role="user",
                                           content=text, channel="web", conversation_key="web:u1", speaker="",
                                           created_at=T0 + timedelta(minutes=i)))  # fmt: skip
        sessions.append(sid)
    return sessions


def test_plain_letters_find_accented_words_and_back(any_state: State) -> None:
    s0, s1, _ = _fill(any_state)
    turns = any_state.turns
    assert turns.search_sessions("u1", "cafe") == [s0]
    assert turns.search_sessions("u1", "muller") == [s0]
    assert turns.search_sessions("u1", "Müller") == [s0]
    assert turns.search_sessions("u1", "MULLER CAFE") == [s0]
    assert turns.search_sessions("u1", "creme brulee") == [s1]
    assert turns.search_sessions("u1", "Crème brûlée") == [s1]
    assert [c for _, c in turns.rows_with_words("u1", "cafe muller")] == [TEXTS[0]]
    assert [c for _, c in turns.rows_with_words("u1", "brulee")] == [TEXTS[1]]
    assert turns.search_sessions("u1", "caff") == []  # folded, not fuzzy


def test_a_long_query_is_cut_to_its_first_words(any_state: State) -> None:
    s0, _, _ = _fill(any_state)
    filler = ["cafe"] * (MAX_QUERY_WORDS - 1)
    assert len(query_words(" ".join([*filler, "muller", "absent"]))) == MAX_QUERY_WORDS
    # the word past the cap is not asked for, so the row is still found
    assert any_state.turns.search_sessions("u1", " ".join([*filler, "muller", "absent"])) == [s0]
    assert any_state.turns.search_sessions("u1", "   ") == []


def test_control_characters_and_lone_surrogates_separate_words(any_state: State) -> None:
    """Found by the API fuzz test: a NUL inside a word ended FTS5's quoted string (a 500 from forget)."""
    s0, _, _ = _fill(any_state)
    assert query_words("cafe\x00muller\udb77\x7f") == ["cafe", "muller"]
    assert any_state.turns.search_sessions("u1", "cafe\x00muller") == [s0]
    assert [c for _, c in any_state.turns.rows_with_words("u1", "\x01cafe\ud951 muller\x00")] == [TEXTS[0]]
    assert any_state.turns.search_sessions("u1", "\x00\udb77") == []
