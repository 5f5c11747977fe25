"""A short fuzz of every target, as part of ``make test``: a few seconds each, under
atheris in a subprocess (``run.py``).  Any crash fails the test and prints the input
(kept under ``tests/fuzz/artifacts/<target>/``).  ``make fuzz`` runs the long budget.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run

#: Seconds per target: with the subprocess's start and the seeds' first pass, about 70 s
#: for the fifteen targets on a loaded machine.
SECONDS = 2


@pytest.mark.parametrize("target", run.TARGET_NAMES)
def test_short_fuzz_finds_no_crash(target: str, tmp_path: Path) -> None:
    # New inputs go to tmp_path: the short run starts from the seeds alone every time.
    outcome = run.fuzz(target, SECONDS, found=tmp_path)
    details = "\n".join(run.describe_artifact(p) for p in outcome.artifacts)
    assert not outcome.crashed, f"{outcome.summary()}\n{details}\n" + "\n".join(
        outcome.log.splitlines()[-40:]
    )
    # It really ran: the seeds were loaded and then fuzzed.
    assert outcome.start_cov > 0, outcome.log[-2000:]
    assert outcome.executions > 0, outcome.log[-2000:]
