"""Fuzzing the attachment readers in their sandbox (``-m fuzz``, issue 27's acceptance line).

Hypothesis mutates office, PDF, image and Character Card files (bytes flipped, cut, repeated,
spliced; for .docx/.odt also the XML inside, re-zipped so the XML parser sees the mutation) and
each one is read exactly as an attachment is: ``read_file`` in the daemon's reader sandbox. The
daemon runs in a process of its own; meanwhile its event loop's stalls are measured from inside,
and ``/healthz`` is asked every 50 ms from outside. Asserted throughout: ``/healthz`` answers within a
second, the loop never stalls for a second, and every read ends within the wall-clock limit (a
worker past a limit is stopped, never left running). The figures go to docs/security.md.

    KITH_FUZZ_EXAMPLES=10000 .venv/bin/python -m pytest -m fuzz tests/media/test_sandbox_fuzz.py -s
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import json
import logging
import multiprocessing
import os
import struct
import threading
import time
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
import requests
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from gateway.app import Gateway
from gateway.media.errors import MediaError
from gateway.media.limits import LIMITS, MediaLimits
from gateway.media.reader import read_file
from gateway.media.sandbox import sandbox
from gateway.media.sniff import sniff_magic
from gateway.testing import test_config
from tests.media import bombs
from tests.media.rig import pdf
from tests.media.test_bad_inputs import png_header

EXAMPLES = int(os.environ.get("KITH_FUZZ_EXAMPLES", "2000"))
MIB = 1024 * 1024
# Tighter than the defaults, so a run of thousands of files meets the limits often enough to test them.
FUZZ_LIMITS = MediaLimits(read_memory_bytes=384 * MIB, read_cpu_s=4, extract_timeout_s=10, read_workers=2)
SLACK_S = 5.0  # a read may end this long after its wall clock (the kill, the reap, a loaded machine)


# ------------------------------------------------------------------------------------ seed files


def _docx_xml(paragraphs: list[str]) -> bytes:
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    return f'<w:document xmlns:w="{bombs.W_NS}"><w:body>{body}</w:body></w:document>'.encode()


def _odt_xml(paragraphs: list[str]) -> bytes:
    ns = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
    body = "".join(f"<text:p>{p}</text:p>" for p in paragraphs)
    return (f'<office:document-content xmlns:office="urn:x" xmlns:text="{ns}"><office:body><office:text>'
            f"{body}</office:text></office:body></office:document-content>").encode()  # fmt: skip


def _docx(xml: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", xml)
    return out.getvalue()


def _odt(xml: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mimetype", bombs.ODT_MIME, compress_type=zipfile.ZIP_STORED)
        zf.writestr("content.xml", xml)
    return out.getvalue()


def _image(fmt: str, size: tuple[int, int] = (48, 32)) -> bytes:
    out = io.BytesIO()
    img = Image.new("RGB", size, (200, 30, 30))
    img.putpixel((3, 3), (0, 0, 255))
    img.save(out, format=fmt)
    return out.getvalue()


def _card_png() -> bytes:
    """A Character Card: a PNG carrying the card's JSON, base64, in a ``tEXt`` chunk named ``chara``."""
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": "Ada", "description": "A patient tutor.", "first_mes": "Hello!"}}  # fmt: skip
    text = b"chara\0" + base64.b64encode(json.dumps(card).encode())
    chunk = struct.pack(">I", len(text)) + b"tEXt" + text + struct.pack(">I", zlib.crc32(b"tEXt" + text))
    png = _image("PNG")
    return png[:33] + chunk + png[33:]  # right after IHDR


@functools.cache
def seeds() -> dict[str, bytes]:
    """Built on first use, not at import: every process of the suite collects this module, and the
    bzip2 bomb alone takes a third of a second to make."""
    return {
        "docx": _docx(_docx_xml(["First paragraph.", "Second one, with <b>markup</b> &amp; more."])),
        "odt": _odt(_odt_xml(["Eins.", "Zwei."])),
        "pdf": pdf(["A page of text.", "Another page."]),
        "png": _image("PNG"),
        "jpeg": _image("JPEG"),
        "gif": _image("GIF"),
        "webp": _image("WEBP"),
        "card-png": _card_png(),
        "card-json": json.dumps({"spec": "chara_card_v3", "data": {"name": "Ada", "first_mes": "Hi"}}).encode(),
        "html": b"<!doctype html><html><head><style>p{}</style></head><body><p>Hello <b>there</b></p></body></html>",
        # The bombs of issue 27, small enough to be read thousands of times, mutated like the rest.
        "bomb-bzip2-docx": bombs.bzip2_docx(4),
        "bomb-deflate-odt": bombs.deflate_odt(64),
        "bomb-nested-docx": bombs.nested_runs_docx(100_000),
        "bomb-pixels-png": png_header(20_000, 20_000),
    }


XML_SEEDS = {"docx-xml": (_docx_xml(["One.", "Two."]), _docx), "odt-xml": (_odt_xml(["Eins."]), _odt)}
TOKENS = [b"<w:p>", b"</w:p>", b"<w:r>", b"<!DOCTYPE x [<!ENTITY a 'aaaa'>]>", b"&a;", b"\xff\xfe", b"\x00",
          b"<![CDATA[", b"obj", b"endobj", b"stream", b"/Length 999999999", b"IDAT", b"\x89PNG", b"PK\x03\x04"]


PARAGRAPH = b"<w:p><w:r><w:t>x</w:t></w:r></w:p>"


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(sorted(seeds()) + sorted(XML_SEEDS)))
    seed, wrap = (XML_SEEDS[kind] if kind in XML_SEEDS else (seeds()[kind], None))
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "insert", "token", "delete", "repeat", "truncate"]))
        # Mostly past the magic bytes, so most mutants still reach their parser.
        at = draw(st.integers(min(8, len(data)) if draw(st.integers(0, 9)) else 0, len(data)))
        if op == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "token":
            data[at:at] = draw(st.sampled_from(TOKENS)) * draw(st.integers(1, 64))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "repeat":
            piece = bytes(data[at : at + draw(st.integers(1, 32))])
            data[at:at] = piece * draw(st.integers(1, 2000))
        elif op == "truncate" and len(data) > 16:
            del data[max(16, at) :]
    if wrap is not None and draw(st.integers(0, 19)) == 0:
        # One XML file in twenty grows to hundreds of thousands of elements (a few hundred KB zipped,
        # up to 40 MB of markup, under max_unpacked_bytes), after the other mutations so none cuts
        # it short: what the memory and CPU limits are for.
        at = data.find(b"<w:body>") + len(b"<w:body>") if b"<w:body>" in data else len(data) // 2
        data[at:at] = PARAGRAPH * draw(st.sampled_from([100_000, 400_000, 1_200_000]))
    return kind, wrap(bytes(data)) if wrap is not None else bytes(data)


# ------------------------------------------------------------------------------- the live daemon
# The daemon runs in a process of its own, so the stalls measured on its event loop are its own:
# in a thread of this process it would share the GIL with Hypothesis building 40 MB mutants.


def _daemon_process(data: str, conn: Connection) -> None:  # the spawned process's target
    asyncio.run(_daemon_main(Path(data), conn))


async def _daemon_main(data: Path, conn: Connection) -> None:
    gw = Gateway(test_config(data), entry_points=False)
    figures: dict[str, Any] = {"max_stall_s": 0.0, "slow_callbacks": []}

    async def read(request: web.Request) -> web.Response:
        """What the media pipeline does with an attachment's bytes: sniff_magic here, the rest in the
        sandbox. JSON (base64), because the guard takes JSON bodies only on test routes."""
        body = await request.json()
        raw, name = base64.b64decode(body["data"]), body["name"]
        started = time.monotonic()
        try:
            result = await sandbox(gw).run(read_file, raw, sniff_magic(raw, name), name, FUZZ_LIMITS, label=name)
            outcome = "read" if (result.image or result.document) else "not-a-type-kith-reads"
        except MediaError as exc:
            outcome = type(exc).__name__
        return web.json_response({"outcome": outcome, "took_s": time.monotonic() - started})

    async def stats(request: web.Request) -> web.Response:
        box = sandbox(gw).stats
        return web.json_response({**figures, "stopped": dict(box.stopped), "workers_started": box.started,
                                  "max_worker_rss_bytes": box.max_rss_bytes})  # fmt: skip

    class SlowCallbacks(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "took" in record.getMessage():
                figures["slow_callbacks"].append(record.getMessage()[-300:])

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            figures["max_stall_s"] = max(figures["max_stall_s"], now - last - 0.01)
            last = now

    gw.http_app.router.add_post("/fuzz/read", read)
    gw.http_app.router.add_get("/fuzz/stats", stats)
    await gw.__aenter__()
    try:
        gw.stash[LIMITS] = FUZZ_LIMITS
        loop = asyncio.get_running_loop()
        # Debug mode names any callback that holds the loop for 0.25 s, so a stall is explained.
        loop.set_debug(True)
        loop.slow_callback_duration = 0.25
        logging.getLogger("asyncio").addHandler(SlowCallbacks(logging.WARNING))
        task = asyncio.create_task(ticker())
        conn.send(gw.port)
        await loop.run_in_executor(None, conn.recv)  # until the test says stop
        task.cancel()
    finally:
        await gw.close()


@dataclass
class Live:
    base: str
    max_healthz_s: float = 0.0
    healthz_calls: int = 0
    healthz_failures: int = 0


def _poll(live: Live, done: threading.Event) -> None:
    with requests.Session() as http:
        while not done.is_set():
            start = time.monotonic()
            try:
                http.get(f"{live.base}/healthz", timeout=10).raise_for_status()
            except requests.RequestException:
                live.healthz_failures += 1
            live.max_healthz_s = max(live.max_healthz_s, time.monotonic() - start)
            live.healthz_calls += 1
            done.wait(0.05)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    # Not a daemonic process: those may not start children, and the daemon's sandbox starts workers.
    process = ctx.Process(target=_daemon_process, args=(str(tmp_path_factory.mktemp("fuzz") / "data"), theirs))
    process.start()
    assert ours.poll(180), "the daemon did not start"
    state = Live(base=f"http://127.0.0.1:{ours.recv()}")
    done = threading.Event()
    poller = threading.Thread(target=_poll, args=(state, done), daemon=True)
    poller.start()
    yield state
    done.set()
    poller.join(30)
    ours.send("stop")
    process.join(60)
    if process.exitcode is None:
        process.kill()
        process.join(10)


@pytest.mark.fuzz
def test_mutated_files_never_stall_the_daemon_or_outlive_their_limits(live: Live) -> None:
    outcomes: Counter[str] = Counter()
    slowest = 0.0
    started = time.monotonic()
    http = requests.Session()

    def daemon_figures() -> dict[str, Any]:
        answer: dict[str, Any] = http.get(f"{live.base}/fuzz/stats", timeout=30).json()
        return answer

    @given(case=mutated())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def read(case: tuple[str, bytes]) -> None:
        nonlocal slowest
        kind, data = case
        body = {"name": f"fuzz.{kind}", "data": base64.b64encode(data).decode()}
        answer = http.post(f"{live.base}/fuzz/read", json=body, timeout=FUZZ_LIMITS.extract_timeout_s + 60).json()
        slowest = max(slowest, answer["took_s"])
        outcomes[answer["outcome"]] += 1
        assert answer["took_s"] < FUZZ_LIMITS.extract_timeout_s + SLACK_S, f"{kind}: a read outlived its wall clock"
        assert live.max_healthz_s < 1.0, f"/healthz took {live.max_healthz_s:.2f} s"
        if len(outcomes) and sum(outcomes.values()) % 500 == 0:
            seen = daemon_figures()
            assert seen["max_stall_s"] < 1.0, seen

    read()
    seen = daemon_figures()
    http.close()
    figures = {"examples": sum(outcomes.values()), "minutes": round((time.monotonic() - started) / 60, 1),
               "outcomes": dict(outcomes), "stopped": seen["stopped"], "workers started": seen["workers_started"],
               "max worker peak RSS MiB": round(seen["max_worker_rss_bytes"] / MIB),
               "slowest read s": round(slowest, 2), "max loop stall s": round(seen["max_stall_s"], 3),
               "max /healthz s": round(live.max_healthz_s, 3), "/healthz calls": live.healthz_calls,
               "/healthz failures": live.healthz_failures, "slow callbacks": seen["slow_callbacks"]}  # fmt: skip
    print("\nsandbox fuzz:", json.dumps(figures))
    assert seen["max_stall_s"] < 1.0, figures
    assert live.healthz_failures == 0 and live.healthz_calls > 0
    assert seen["max_worker_rss_bytes"] <= FUZZ_LIMITS.read_memory_bytes, "no worker got past its memory limit"
