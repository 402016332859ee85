"""The media caps are the config's ``media`` section: validated (positive, named in the error), and a
lowered cap refuses a file with a reply that names it and the cap, keeping nothing of that message
and losing nothing kept before."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError
from gateway.configread import parse_config
from gateway.media.limits import DEFAULT_LIMITS, media_limits
from gateway.testing import GatewayFactory
from tests.media.rig import media_files, pdf, signed_in_browser


@pytest.mark.parametrize(("media", "problem"), [
    ({"max_bytes": 0}, "media.max_bytes: Input should be greater than or equal to 1"),
    ({"max_pages": -5}, "media.max_pages: Input should be greater than or equal to 1"),
    ({"transcribe_timeout_s": 0}, "media.transcribe_timeout_s: Input should be greater than 0"),
    ({"max_pixels": 100_000_000}, "media.max_pixels: Input should be less than or equal to 89478485"),
    ({"max_files": "many"}, "media.max_files: Input should be a valid integer"),
    ({"max_bytes": 2_000_000, "upload_total_bytes": 1_000_000},
     "media.upload_total_bytes: 1,000,000 is below media.max_bytes (2,000,000)"),
    ({"max_byte": 10}, "media.max_byte: unknown key"),
])  # fmt: skip
def test_a_bad_media_limit_is_named_in_the_error(media: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"media": media}, env={})
    assert any(p.startswith(problem) for p in err.value.problems), err.value.problems


def test_the_defaults_are_the_documented_limits() -> None:
    media = parse_config({}, env={}).media
    assert media == DEFAULT_LIMITS
    assert (media.max_bytes, media.max_files, media.max_pages, media.max_chars) == (20 * 1024 * 1024, 8, 200, 60_000)
    assert parse_config({}, env={"KITH__MEDIA__MAX_PAGES": "3"}).media.max_pages == 3


async def test_a_lowered_limit_refuses_the_file_and_loses_nothing(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(media={"max_pages": 2, "max_bytes": 40_000})
    assert media_limits(gw).max_pages == 2
    b = await signed_in_browser(gw)
    try:
        status, up = await b.upload(pdf(["first page", "second page"]), "short.pdf", "application/pdf")
        assert status == 201, up
        ok = await b.send("keep this one, marmalade", [up["upload_id"]])
        assert ok["type"] == "reply" and not ok["notice"], ok
        kept = media_files(gw.data_dir, b.user_id)
        assert len(kept) == 2 and kept[0].endswith("short.pdf"), kept  # the file and its text

        status, up = await b.upload(pdf(["one", "two", "three"]), "long.pdf", "application/pdf")
        assert status == 201, up
        refused = await b.send("and this one, porridge", [up["upload_id"]])
        assert refused["type"] == "reply" and refused["notice"] is True, refused
        assert refused["text"] == ("I could not take that file in: long.pdf: the PDF has 3 pages; kith reads at "
                                   "most 2. The message was not sent to the model.")
        assert media_files(gw.data_dir, b.user_id) == kept, "nothing stored, nothing lost"
        assert gw.state.turns.rows_with_words(b.user_id, "porridge") == [], "the refused message is not kept"
        kept_rows = gw.state.turns.rows_with_words(b.user_id, "marmalade")
        assert kept_rows[0][1].startswith("keep this one, marmalade\n\n[short.pdf](media/"), kept_rows

        status, answer = await b.upload(b"x" * 40_001, "big.txt", "text/plain")
        assert status == 413 and "40,000" in answer["message"], answer
        assert (await b.send("still here?", []))["type"] == "reply"
    finally:
        await b.close()
