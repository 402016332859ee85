"""The per-turn context record's token counts equal what the budgeter counts (``sent_tokens``), without
rendering plain sections a second time on the turn path."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.turn.budget import sent_tokens
from gateway.turn.record import _tokens
from gateway.types import ContextSection


@given(title=st.text(max_size=40), text=st.text(max_size=400), as_data=st.booleans())
def test_section_tokens_match_the_budgeter(title: str, text: str, as_data: bool) -> None:
    section = ContextSection(source="s", title=title, text=text, as_data=as_data)
    assert _tokens(section) == sent_tokens(section)
