"""Give freed heap memory back to the operating system (glibc ``malloc_trim``, ``mallopt``).

Loading the embedder reads and rewrites a 23 MB model and onnxruntime parses it again: ~20 MB of
heap that is free afterwards but stays in the process (glibc keeps freed memory below the top of the
heap for reuse). One trim after each such one-off peak returns it: the daemon's resident size is what
it keeps, not what it once needed. A no-op where the C library has no ``malloc_trim`` (musl, macOS).
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable

# mallopt's parameter number for the size from which malloc maps memory of its own (glibc malloc.h).
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1024 * 1024


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")  # not find_library: that runs ldconfig in a subprocess
    except OSError:
        return None


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        fn = _libc().malloc_trim  # type: ignore[union-attr]
    except AttributeError:
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


def map_large_blocks() -> bool:
    """Blocks of ``MMAP_THRESHOLD`` (1 MiB) and more get memory of their own, given back to the OS
    when freed (``kith run``, at its start). glibc's threshold otherwise grows to the largest block
    freed so far (up to 32 MiB): after the embedder's load (the model's bytes, their rewrite) and the
    index's opening, big blocks came from the heaps of the threads that made them, and freed ones
    stayed resident among live data where ``trim`` cannot return them. Measured: a daemon after
    400 turns, every stage on, 204 -> 188 MB; embedding CPU unchanged (docs/memory.md). False where
    the C library has no ``mallopt`` (musl, macOS)."""
    try:
        fn = _libc().mallopt  # type: ignore[union-attr]
    except AttributeError:
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return bool(fn(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def trim() -> bool:
    """Collect garbage, then return free heap pages to the OS; False where that is not possible."""
    gc.collect()
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
