"""The replay's list of lines no peer can reach names lines that exist.

``make fuzz`` ends with ``replay.py``, which refuses an exclusion whose module or
anchor it cannot find; the list outlived the core's reorganisation once (modules
moved from ``connection/`` and ``protocol/``) and only the long run noticed.  This
checks every entry against the tree in the ordinary test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CORE = HERE.parents[1] / "mrtr_core"
sys.path.insert(0, str(HERE))

import not_peer_reachable  # noqa: E402
import replay  # noqa: E402

MODULES = sorted({entry.module for entry in not_peer_reachable.EXCLUSIONS})


@pytest.mark.parametrize("module", MODULES)
def test_every_exclusion_names_a_module_and_a_line_of_it(module: str) -> None:
    path = CORE / module
    assert path.is_file(), f"not_peer_reachable names {module}, which is not in mrtr_core/"
    excluded = replay.excluded_lines(module, path.read_text())  # (raises for a lost anchor)
    anchors = [e for e in not_peer_reachable.EXCLUSIONS if e.module == module]
    assert len(set(excluded.values())) >= 1 and len(excluded) >= len(anchors)
