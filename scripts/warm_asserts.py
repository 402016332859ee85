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

import importlib.util
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def _warm(paths: list[str]) -> int:
    from _pytest.assertion.rewrite import PYC_TAIL, _rewrite_test, _write_pyc_fp, get_cache_dir

    done = 0
    for name in paths:
        source = Path(name)
        pyc = get_cache_dir(source) / (source.name[:-3] + PYC_TAIL)
        if _current(source, pyc):
            continue
        source_hash, code = _rewrite_test(source, None)  # type: ignore[arg-type]
        pyc.parent.mkdir(parents=True, exist_ok=True)
        part = pyc.with_name(f"{pyc.name}.{os.getpid()}")
        with open(part, "wb") as fp:
            _write_pyc_fp(fp, source_hash, code)
        os.replace(part, pyc)  # whole or not at all, as pytest writes it
        done += 1
    return done


def _current(source: Path, pyc: Path) -> bool:
    """Whether ``pyc`` holds the rewrite of ``source`` as it is now (the hash pytest checks)."""
    try:
        with open(pyc, "rb") as fp:
            header = fp.read(16)
    except OSError:
        return False
    return header[8:16] == importlib.util.source_hash(source.read_bytes())[:8]


def _plugin_files() -> list[Path]:
    """The modules of the installed pytest plugins' packages, which pytest rewrites too (its
    ``_mark_plugins_for_rewrite``): hypothesis and schemathesis are hundreds of modules."""
    import importlib.metadata

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
