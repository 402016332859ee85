"""Channel tests: platform fakes under tests/fakes, adapters driven through the real client libraries."""

from __future__ import annotations

import sys
from pathlib import Path

# ``tests.fakes`` is imported by absolute name; make the repository root importable however pytest
# was started (plain ``pytest`` does not put the working directory on sys.path).
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
