"""An upload's name is the sender's text: control characters never reach a log line, a reply or a
path, and Off-The-Record leaves no refused file's name in the log. One person cannot use up
everyone's upload budget, and an upload can be taken back before it is sent (issue 27)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gateway.config import ConfigError
from gateway.configread import parse_config
from gateway.media.errors import TooLarge
from gateway.media.limits import LIMITS, MediaLimits
from gateway.media.names import clean_name
from gateway.media.uploads import UploadStore, uploads
from gateway.testing import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.media.rig import media_files, png, signed_in_browser
from tests.signin.rig import url

HOSTILE = "report\n2026-11-28 INFO kith: all good\x1b]0;owned\x07\x1b[2J\u202egpj.exe\u2028.png"
BINARY = b"MZ\x90\x00" + bytes(range(256)) * 4  # a program: refused as not a kind of file kith reads


def _hidden(text: str) -> list[str]:
    return [ch for ch in text if ch in "\n\r\x1b\x07\u202e\u2028"]


def test_a_name_loses_every_control_and_format_character() -> None:
    assert clean_name(HOSTILE) == "report 2026-11-28 INFO kith: all good]0;owned[2Jgpj.exe .png"
    assert clean_name("\x00\x1b\n") == ""
    assert len(clean_name("a" * 1000)) == 255


async def test_a_hostile_upload_name_reaches_no_log_reply_or_path_as_is(
    make_gateway: GatewayFactory, caplog: pytest.LogCaptureFixture, fake_anthropic: FakeAnthropic,
    anthropic_llm: dict[str, Any],
) -> None:  # fmt: skip
    gw = await make_gateway(llm=anthropic_llm)
    fake_anthropic.responders.append(
        lambda body: "Seen." if "Current date and time" in fake_anthropic.system_of(body) else None)
    b = await signed_in_browser(gw)
    try:
        caplog.set_level(logging.DEBUG)
        status, up = await b.upload(BINARY, HOSTILE, "image/png")
        assert status == 201 and not _hidden(up["name"]), up
        refused = await b.send("look", [up["upload_id"]])
        assert refused["notice"] is True and "gpj.exe .png is not a kind of file I read" in refused["text"]
        assert not _hidden(refused["text"]), refused
        lines = [r.getMessage() for r in caplog.records if "refused an attachment" in r.getMessage()]
        assert len(lines) == 1 and "gpj.exe .png" in lines[0], lines
        # asyncio's own records span lines by design ("Task exception was never retrieved\nfuture: ..."),
        # and one can come from an earlier test's leftovers collected meanwhile: kith's lines are checked.
        assert not any(_hidden(r.getMessage()) for r in caplog.records if r.name != "asyncio"), \
            "no control character in any log line"

        status, up = await b.upload(png(), HOSTILE, "image/png")
        assert status == 201
        ok = await b.send("and this one", [up["upload_id"]])
        assert ok["text"] == "Seen.", ok
        stored = media_files(gw.data_dir, b.user_id)
        assert len(stored) == 1 and not _hidden(stored[0]), stored
        said = " ".join(block.get("text", "") for block in fake_anthropic.last_turn()["messages"][-1]["content"])
        assert f"[{clean_name(HOSTILE)}]({stored[0]})" in said, "the transcript link carries the clean name"
    finally:
        await b.close()


async def test_off_the_record_a_refused_file_leaves_no_name_in_the_log(
    make_gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    gw = await make_gateway()
    b = await signed_in_browser(gw)
    try:
        caplog.set_level(logging.DEBUG)
        status, up = await b.upload(BINARY, "divorce-lawyer-letter.png", "image/png")
        assert status == 201
        logged = await b.send("look", [up["upload_id"]])  # on the record: the refusal names the file
        assert logged["notice"] is True
        assert any("divorce-lawyer-letter" in r.getMessage() for r in caplog.records)
        caplog.clear()

        assert "ON" in (await b.send("/otr on", []))["text"]
        status, up = await b.upload(BINARY, "divorce-lawyer-letter.png", "image/png")
        assert status == 201
        refused = await b.send("look", [up["upload_id"]])
        assert refused["notice"] is True and "divorce-lawyer-letter.png" in refused["text"], "the person is told"
        records = [r.getMessage() for r in caplog.records]
        assert any("refused an attachment" in m and "Off-The-Record" in m for m in records), records
        assert not any("divorce" in m for m in records), records
    finally:
        await b.close()


def test_one_person_cannot_use_up_everyones_upload_budget() -> None:
    store = UploadStore(MediaLimits(max_bytes=100, upload_person_bytes=250, upload_total_bytes=1000))
    for i in range(2):
        store.add(user_id="alice", name=f"{i}.bin", mime_type="", data=b"x" * 100)
    with pytest.raises(TooLarge, match=r"your uploads waiting for a message hold 200 bytes.*past 250"):
        store.add(user_id="alice", name="2.bin", mime_type="", data=b"x" * 100)
    store.add(user_id="alice", name="small.bin", mime_type="", data=b"x" * 50)  # up to the cap exactly
    for i in range(2):
        store.add(user_id="bob", name=f"{i}.bin", mime_type="", data=b"x" * 100)  # others are not blocked


def test_a_cancelled_upload_frees_its_budget_and_only_its_person_can_cancel_it() -> None:
    store = UploadStore(MediaLimits(max_bytes=100, upload_person_bytes=100, upload_total_bytes=1000))
    up = store.add(user_id="alice", name="a.bin", mime_type="", data=b"x" * 100)
    with pytest.raises(TooLarge):
        store.add(user_id="alice", name="b.bin", mime_type="", data=b"x")
    assert store.cancel(up.upload_id, user_id="bob") is False, "another person's upload is unknown to them"
    assert store.get(up.upload_id, user_id="alice") is not None
    assert store.cancel(up.upload_id, user_id="alice") is True
    assert store.cancel(up.upload_id, user_id="alice") is False and store.take(up.upload_id) is None
    store.add(user_id="alice", name="b.bin", mime_type="", data=b"x" * 100)


@pytest.mark.parametrize(("media", "problem"), [
    ({"max_bytes": 2_000_000, "upload_person_bytes": 1_000_000},
     "media.upload_person_bytes: 1,000,000 is below media.max_bytes (2,000,000)"),
    ({"upload_person_bytes": 300 * 1024 * 1024},
     "media.upload_person_bytes: 314,572,800 is above media.upload_total_bytes (209,715,200)"),
    ({"read_memory_bytes": 1024}, "media.read_memory_bytes: Input should be greater than or equal to 134217728"),
    ({"read_cpu_s": 0}, "media.read_cpu_s: Input should be greater than 0"),
])  # fmt: skip
def test_bad_budget_and_sandbox_limits_are_named(media: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"media": media}, env={})
    assert any(p.startswith(problem) for p in err.value.problems), err.value.problems


def test_the_per_person_default_is_well_under_the_total() -> None:
    media = parse_config({}, env={}).media
    assert media.max_bytes <= media.upload_person_bytes <= media.upload_total_bytes // 4


async def test_an_upload_is_cancelled_over_http_by_its_person_only(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    gw.stash[LIMITS] = MediaLimits(max_bytes=100_000, upload_person_bytes=100_000, upload_total_bytes=1_000_000)
    alice = await signed_in_browser(gw, "alice-laptop")
    bob = await signed_in_browser(gw, "bob-laptop")
    try:
        status, up = await alice.upload(b"a" * 90_000, "notes.txt", "text/plain")
        assert status == 201
        status, answer = await alice.upload(b"b" * 20_000, "more.txt", "text/plain")
        assert status == 413 and "past 100,000" in answer["message"], answer
        status, _ = await bob.upload(b"c" * 90_000, "bob.txt", "text/plain")
        assert status == 201, "another person still has their own budget"

        path = url(gw, f"/api/uploads/{up['upload_id']}")
        async with bob.http.delete(path, json={}, headers={"X-CSRF-Token": bob.csrf}) as resp:
            assert resp.status == 404, "Bob cannot cancel Alice's upload, nor learn that it exists"
        assert uploads(gw).get(up["upload_id"], user_id=alice.user_id) is not None
        async with alice.http.delete(path, json={}, headers={"X-CSRF-Token": alice.csrf}) as resp:
            assert resp.status == 200 and await resp.json() == {"upload_id": up["upload_id"], "cancelled": True}
        async with alice.http.delete(path, json={}, headers={"X-CSRF-Token": alice.csrf}) as resp:
            assert resp.status == 404
        status, _ = await alice.upload(b"b" * 20_000, "more.txt", "text/plain")
        assert status == 201, "the cancelled upload no longer counts"
        gone = await alice.send("read it", [up["upload_id"]])
        assert gone["type"] == "error" and gone["code"] == "bad_attachment", gone
    finally:
        await alice.close()
        await bob.close()
