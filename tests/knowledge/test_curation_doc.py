"""Sectioned Markdown: canonical round trip, tolerant of CRLF and trailing whitespace."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.memory.curation import parse, serialize

CANONICAL = """# Alice

Profile kept by the assistant.

## Work
- Software engineer at Acme
  - team: payments
* Prefers async standups

### Past jobs
1. Globex (2019-2021)

## Preferences
- Tea, not coffee
Some prose line.

```
## not a heading inside a fence
```
"""


def test_canonical_text_round_trips_unchanged() -> None:
    assert serialize(parse(CANONICAL)) == CANONICAL


def test_structure() -> None:
    doc = parse(CANONICAL)
    assert doc.preamble == ("# Alice", "", "Profile kept by the assistant.")
    assert [s.title for s in doc.sections] == ["Work", "Preferences"]
    work = doc.sections[0]
    texts = [b.text for b in work.bullets()]
    assert texts == ["Software engineer at Acme", "Prefers async standups", "Globex (2019-2021)"]
    assert work.items[0].cont == ("  - team: payments",)
    assert work.subsections[0].title == "Past jobs"
    assert doc.bullet_count() == 4


def test_crlf_trailing_whitespace_and_extra_blanks_parse_to_the_same_doc() -> None:
    messy = "\r\n".join(line + "  " for line in CANONICAL.split("\n")).replace("## Work", "## Work ##\r\n\r\n")
    messy = messy.rstrip() + "\n\n\n"
    assert parse(messy) == parse(CANONICAL)
    assert serialize(parse(messy)) == CANONICAL


def test_empty_and_headingless_docs() -> None:
    assert serialize(parse("")) == ""
    assert serialize(parse("just text\r\n")) == "just text\n"
    assert parse("## \n- a\n").sections == ()  # an empty heading is text, not a section


LINES = st.sampled_from(
    ["", " ", "# T", "## A", "## B ##", "### s", "#### deep", "- x", "* y", "+ z", "1. n", "  cont", "\tcont",
     "text", "```", "~~~", "- ", "##", "## ", "- dup", "- dup", "ö ß", "  - nested"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=30), st.sampled_from(["\n", "\r\n", "\r"]))
def test_serialize_is_a_fixed_point(lines: list[str], eol: str) -> None:
    once = serialize(parse(eol.join(lines)))
    assert serialize(parse(once)) == once
    assert parse(once) == parse(eol.join(lines))
