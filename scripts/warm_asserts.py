"""Rewrite the suite's test modules for pytest's assertions once, before the suite's processes start.

Every pytest process (each xdist worker and the serial run) imports every test module, and on a fresh
clone each one parsed, rewrote and compiled all of them itself, at the same moment: 7-8 s of CPU per
process before its first test. pytest keeps the rewritten code in ``__pycache__`` as a hash-checked pyc
that every later process reads, so writing it here, once, in parallel, saves that in all but one.

The rewrite is pytest's own (``_rewrite_test``, with no config: this suite does not turn on
``enable_assertion_pass_hook``) and the file is the one pytest would write and checks against the
source's hash, so a stale or foreign file is simply rewritten again. pytest's private API may change:
anything unexpected here only skips the warm-up (scripts/test goes on).
"""

from __future__ import annotations

import os
import sys
import types
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def _warm(paths: list[str]) -> int:
    from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, _rewrite_test, _write_pyc, get_cache_dir

    quiet = types.SimpleNamespace(trace=lambda *_: None)  # pytest's AssertionState, as far as these use it
    done = 0
    for name in paths:
        source = Path(name)
        pyc = get_cache_dir(source) / (source.name[:-3] + PYC_TAIL)
        if _read_pyc(source, pyc, quiet.trace) is not None:
            continue  # already the rewrite of the source as it is now (pytest's own check)
        source_hash, code = _rewrite_test(source, None)  # type: ignore[arg-type]
        pyc.parent.mkdir(parents=True, exist_ok=True)
        done += _write_pyc(quiet, code, source_hash, pyc)  # type: ignore[arg-type]
    return done


def _plugin_files() -> list[Path]:
    """The modules of the installed pytest plugins' packages, which pytest rewrites too (its
    ``_mark_plugins_for_rewrite``): hypothesis and schemathesis are hundreds of modules."""
    import importlib.metadata
    import importlib.util

    from _pytest.config import _iter_rewritable_modules

    files: list[Path] = []
    for dist in importlib.metadata.distributions():
        if not any(ep.group == "pytest11" for ep in dist.entry_points):
            continue
        for name in _iter_rewritable_modules([str(f) for f in dist.files or []]):
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                continue
            for where in spec.submodule_search_locations or []:
                files += Path(where).rglob("*.py")
            if not spec.submodule_search_locations:
                files.append(Path(spec.origin))
    return files


def main(roots: list[str]) -> int:
    tests = [p for root in roots for p in Path(root).rglob("*.py")
             if p.name.startswith("test_") or p.name == "conftest.py"]  # fmt: skip
    jobs = max(1, min(os.cpu_count() or 1, 4))
    try:
        paths = sorted({str(p) for p in tests + _plugin_files()})
        with ProcessPoolExecutor(jobs) as pool:
            done = sum(pool.map(_warm, [paths[i::jobs] for i in range(jobs)]))
    except Exception as exc:  # a changed private API: the suite rewrites as it always did
        print(f"==> assertion rewrite not warmed ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 0
    if done:
        print(f"==> pytest's assertion rewrite of {done} modules done once, for every process of the run")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
