"""No file can take the daemon down (issue 27): every parser of an attachment runs in the reader
sandbox, a separate process with memory, CPU and time limits, and the zip and XML readers refuse
bombs before they inflate.

The bombs are built here (tests/media/bombs.py): a 3 KB .docx/.odt whose bzip2 entry inflates to
3.1 GB (the daemon was OOM-killed), a 1 MB deflate bomb read by the type check on the event loop
(/healthz took 4-11 s), a 48 KB .docx nesting three million runs (ElementTree held the GIL for
seconds), and an entity declared in UTF-16 XML (the byte check did not see it).
"""

from __future__ import annotations

import zipfile
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.media.documents import extract_text
from gateway.media.errors import TooLarge, Unsupported
from gateway.media.limits import LIMITS, MediaLimits
from gateway.media.sandbox import SANDBOX, LimitExceeded, Sandbox, SandboxLimits, sandbox
from gateway.media.sniff import DOCX
from gateway.media.zipread import EntryTooLarge, UnsupportedMethod, read_entry
from gateway.testing import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.media import bombs
from tests.media import sandbox_jobs as jobs
from tests.media.rig import Browser, media_files, signed_in_browser
from tests.media.watch import watching
from tests.signin.rig import url

MIB = 1024 * 1024
STALL_S = 1.0  # the acceptance line: the daemon answers within a second throughout
GROWTH = 256 * MIB  # the daemon's own memory: the file and what is read from it, never the inflated bomb


# ------------------------------------------------------------------------------------ the pool


async def test_a_worker_is_stopped_at_each_limit_and_replaced() -> None:
    # A wall clock far above the CPU limit, so the kernel's CPU stop is what ends _spin even on a
    # busy machine; a second pool below has a short wall clock for the daemon's own kill.
    box = Sandbox(SandboxLimits(memory_bytes=512 * MIB, cpu_s=1, wall_s=60, workers=1))
    quick = Sandbox(SandboxLimits(memory_bytes=512 * MIB, cpu_s=30, wall_s=1, workers=1))
    try:
        async with watching() as watch:
            assert await box.run(jobs.echo, "first", label="a") == "first"
            with pytest.raises(LimitExceeded, match="memory limit for reading one file \\(512 MiB\\)") as mem:
                await box.run(jobs.hog, 1024, label="hog.docx")
            assert mem.value.limit == "memory" and str(mem.value).startswith("hog.docx could not be read: ")
            with pytest.raises(LimitExceeded, match="CPU-time limit for reading one file \\(1 s\\)") as cpu:
                await box.run(jobs.spin, label="spin.pdf")
            assert cpu.value.limit == "cpu"
            with pytest.raises(LimitExceeded, match=r"the reader stopped on it \(a damaged or hostile file\)") as crash:
                await box.run(jobs.crash, label="odd.odt")
            assert crash.value.limit == "crash"
            with pytest.raises(TooLarge, match=r"^as the reader said$"):
                await box.run(jobs.refuse, "as the reader said", label="x")
            assert await box.run(jobs.echo, "still reading", label="b") == "still reading"
            with pytest.raises(LimitExceeded, match="took longer than 1 second to read") as wall:
                await quick.run(jobs.sleep, 30, label="slow.png")
            assert wall.value.limit == "time"
            assert await quick.run(jobs.echo, "after a kill", label="c") == "after a kill"
        assert watch.max_stall_s < STALL_S, watch
        assert box.stats.stopped == {"memory": 1, "cpu": 1, "crash": 1}
        assert box.stats.started == 4, "each stopped worker was replaced; the refusing one was kept"
        assert quick.stats.stopped == {"time": 1} and quick.stats.started == 2
        assert box.stats.max_rss_bytes < 512 * MIB, "no worker got past its memory limit"
    finally:
        await box.close()
        await quick.close()
    assert all(not w.process.is_alive() for w in [*box._idle, *box._busy, *quick._idle])


async def test_a_worker_that_died_while_idle_is_not_blamed_on_the_next_file() -> None:
    import os
    import signal

    box = Sandbox(SandboxLimits(memory_bytes=512 * MIB, cpu_s=5, wall_s=30, workers=1))
    try:
        assert await box.run(jobs.echo, 1, label="a") == 1
        idle = box._idle[0]
        os.kill(idle.process.pid, signal.SIGKILL)
        idle.process.join(10)
        assert await box.run(jobs.echo, 2, label="b") == 2
        assert box.stats.stopped == {} and box.stats.started == 2
    finally:
        await box.close()


async def test_the_pool_starts_with_the_first_file_and_stops_with_the_daemon(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    assert SANDBOX not in gw.stash, "a daemon that gets no file starts no reader"
    box = sandbox(gw)
    assert (box.limits.memory_bytes, box.limits.cpu_s, box.limits.workers) == (1024 * MIB, 20.0, 2)
    assert await box.run(jobs.echo, 7, label="x") == 7
    worker = box._idle[0]
    assert worker.process.is_alive()
    await gw.close()
    assert not worker.process.is_alive(), "gateway_shutdown stops the workers"


# ---------------------------------------------------------------------------- the zip reader


def test_a_zip_entry_is_read_with_a_running_cap_whatever_it_declares() -> None:
    import io

    packed, crc = bombs.deflate_zeros(64)
    lying = bombs.raw_zip([bombs.Entry("word/document.xml", packed, zipfile.ZIP_DEFLATED, crc, 64 * MIB)])
    with zipfile.ZipFile(io.BytesIO(lying)) as zf:
        with pytest.raises(EntryTooLarge):
            read_entry(zf, "word/document.xml", max_bytes=MIB)
        assert read_entry(zf, "word/document.xml", max_bytes=64, truncate=True) == b"\0" * 64
    with zipfile.ZipFile(io.BytesIO(bombs.bzip2_docx())) as zf, pytest.raises(UnsupportedMethod):
        read_entry(zf, "word/document.xml", max_bytes=MIB)


def test_an_entity_declared_in_utf16_xml_is_refused() -> None:
    # Before: the check looked for the bytes "<!ENTITY", which UTF-16 spells with a zero after each
    # letter, so the entity was expanded into the text.
    with pytest.raises(Unsupported, match="damaged"):
        extract_text(bombs.utf16_entity_docx(), DOCX, name="u16.docx", limits=MediaLimits())


def test_a_utf16_document_without_a_dtd_is_still_read() -> None:
    xml = (f'<?xml version="1.0" encoding="UTF-16"?><w:document xmlns:w="{bombs.W_NS}"><w:body>'
           "<w:p><w:r><w:t>Grüße aus Köln</w:t></w:r></w:p></w:body></w:document>").encode("utf-16")  # fmt: skip
    doc = bombs.docx_with(bombs.Entry.deflated("word/document.xml", xml))
    assert extract_text(doc, DOCX, name="ok.docx", limits=MediaLimits()).text == "Grüße aus Köln"


# ------------------------------------------------------------------------ through the daemon


@pytest.fixture
async def chat(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
               anthropic_llm: dict[str, Any]) -> Any:  # fmt: skip
    gw = await make_gateway(llm=anthropic_llm)
    # Chat turns only (the system prompt names the date); background stages get no answer from here.
    fake_anthropic.responders.append(
        lambda body: "Read what I could." if "Current date and time" in fake_anthropic.system_of(body) else None)
    b = await signed_in_browser(gw)
    yield gw, b, fake_anthropic
    await b.close()


async def _send(gw: Gateway, b: Browser, data: bytes, name: str, text: str) -> tuple[dict[str, Any], Any]:
    status, up = await b.upload(data, name, "application/octet-stream")
    assert status == 201, up
    async with watching(url(gw, "/healthz")) as watch:
        reply = await b.send(text, [up["upload_id"]])
    assert watch.max_stall_s < STALL_S, watch
    assert watch.max_healthz_s < STALL_S, watch
    assert watch.peak_growth_bytes < GROWTH, watch
    return reply, watch


@pytest.mark.parametrize(("make", "name", "why"), [
    (bombs.bzip2_docx, "bomb.docx", "bomb.docx: the document is packed with a compression office files do not use"),
    (bombs.bzip2_odt, "bomb.odt", "bomb.odt is not a kind of file I read"),
])  # fmt: skip
async def test_a_3kb_office_file_with_a_bzip2_entry_is_refused_without_inflating(
    chat: Any, make: Any, name: str, why: str
) -> None:
    gw, b, _ = chat
    data = make()
    assert len(data) < 4096
    reply, _ = await _send(gw, b, data, name, "please read this")
    assert reply["notice"] is True and why in reply["text"], reply
    assert media_files(gw.data_dir, b.user_id) == []


async def test_a_1mb_deflate_bomb_leaves_healthz_answering(chat: Any) -> None:
    gw, b, _ = chat
    data = bombs.deflate_odt(1000)  # 1 MB that inflates to 1,000 MiB
    reply, watch = await _send(gw, b, data, "bomb.odt", "please read this")
    assert watch.healthz_calls >= 1
    assert reply["notice"] is True and "bomb.odt is not a kind of file I read" in reply["text"], reply


async def test_a_48kb_docx_nesting_millions_of_runs_does_not_stall_the_daemon(chat: Any) -> None:
    gw, b, _ = chat
    data = bombs.nested_runs_docx(3_000_000)
    assert len(data) < 64 * 1024
    reply, _ = await _send(gw, b, data, "deep.docx", "please read this")
    assert reply["notice"] is True and "deep.docx: the document nests its parts more than 512 levels" in reply["text"]


async def test_a_file_stopped_at_a_limit_costs_only_that_file(chat: Any) -> None:
    gw, b, fake = chat
    gw.stash[LIMITS] = MediaLimits(read_memory_bytes=256 * MIB)
    photo = bombs.big_png()  # 36 Mpx: allowed, but decoding it needs more than 256 MiB
    status, big = await b.upload(photo, "panorama.png", "image/png")
    assert status == 201
    plan = bombs.docx_with(bombs.Entry.deflated("word/document.xml", (
        f'<w:document xmlns:w="{bombs.W_NS}"><w:body><w:p><w:r><w:t>Paint the shed blue.</w:t></w:r></w:p>'
        "</w:body></w:document>").encode()))  # fmt: skip
    status, doc = await b.upload(plan, "plan.docx", "application/octet-stream")
    assert status == 201
    async with watching(url(gw, "/healthz")) as watch:
        reply = await b.send("here is the plan and a photo, marmalade", [big["upload_id"], doc["upload_id"]])
    assert watch.max_stall_s < STALL_S and watch.max_healthz_s < STALL_S, watch
    assert reply["type"] == "reply" and reply["notice"] is False and reply["text"] == "Read what I could.", reply
    limit = ("it is too large once unpacked or decoded: reading it needs more than the memory limit for reading "
             "one file (256 MiB)")  # fmt: skip
    # The person is told by kith itself, in a notice of its own before the answer, not left to the model.
    notices = [f for f in b.passed if f["type"] == "reply" and f.get("notice")]
    assert [n["text"] for n in notices] == [f"panorama.png could not be read: {limit}. Nothing of this file was "
                                            "read or kept; the rest of your message goes on."], b.passed
    # (``status`` frames, "thinking", may come first: they are not part of the answer.)
    frames = [f for f in b.passed if f["type"] != "status"]
    assert frames[0] is notices[0], "before the answer (its first delta)"
    # The text and the document reached the model; the stopped file is named, with why, for it to say.
    turn = fake.last_turn()["messages"][-1]["content"]
    text = " ".join(block.get("text", "") for block in turn) if isinstance(turn, list) else turn
    assert "marmalade" in text and "Paint the shed blue." in text
    assert f"(file panorama.png, not read and not kept: {limit})" in text
    assert 'unread="true"' in text and "Tell them it was not read" in text
    assert sandbox(gw).stats.stopped["memory"] == 1
    # Nothing lost: the message is in the transcript; only the document is kept (and its text).
    assert gw.state.turns.rows_with_words(b.user_id, "marmalade"), "the message was recorded"
    kept = media_files(gw.data_dir, b.user_id)
    assert [p.rsplit("-", 1)[-1] for p in kept] == ["plan.docx", "plan.docx.md"], kept

    # The same file alone: nothing to send, so one notice says which file and why.
    status, big = await b.upload(photo, "panorama.png", "image/png")
    assert status == 201
    alone = await b.send("", [big["upload_id"]])
    assert alone["notice"] is True, alone
    assert alone["text"] == (f"I could not take that file in: panorama.png could not be read: {limit}. "
                             "The message was not sent to the model.")
