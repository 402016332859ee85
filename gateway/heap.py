"""Give freed heap memory back to the operating system (glibc ``malloc_trim``).

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


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL("libc.so.6")  # not find_library: that runs ldconfig in a subprocess
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


def trim() -> bool:
    """Collect garbage, then return free heap pages to the OS; False where that is not possible."""
    gc.collect()
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
