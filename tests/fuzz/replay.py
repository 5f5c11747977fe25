"""Replay the fuzz corpus (the seeds, and what runs found) and measure which of
mrtr_core's branches it reaches.

    python tests/fuzz/replay.py                  # every target, seeds + found/
    python tests/fuzz/replay.py --seeds-only     # the committed seeds alone
    python tests/fuzz/replay.py client server    # some targets

Runs each input through its target in this process (no atheris: the targets are
plain functions) under ``coverage`` with branch measurement, prints the report
for mrtr_core with the lines and branches not reached, and the total.  An input
that crashes is reported and the replay goes on; the exit status is then 1.
The data file is ``tests/fuzz/.coverage.fuzz`` (git-ignored), apart from the
test suite's.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import coverage

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import CORPUS, FOUND, TARGET_NAMES  # noqa: E402


def inputs(target: str, *, seeds_only: bool) -> list[Path]:
    folders = [CORPUS / target] + ([] if seeds_only else [FOUND / target])
    return sorted(p for folder in folders if folder.is_dir() for p in folder.iterdir())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds-only", action="store_true", help="ignore found/")
    parser.add_argument("targets", nargs="*", help=f"some of {', '.join(TARGET_NAMES)}")
    args = parser.parse_args(argv)
    names = args.targets or list(TARGET_NAMES)
    cov = coverage.Coverage(
        data_file=str(HERE / ".coverage.fuzz"),
        branch=True,
        source=["mrtr_core"],
        config_file=False,
    )
    cov.start()
    import targets  # mrtr_core is imported (and measured) from here on

    crashed = 0
    counts = {}
    for name in names:
        files = inputs(name, seeds_only=args.seeds_only)
        counts[name] = len(files)
        for path in files:
            try:
                targets.run(targets.TARGETS[name], path.read_bytes())
            except Exception:
                crashed += 1
                print(f"CRASH {name} {path}\n{traceback.format_exc()}", file=sys.stderr)
    cov.stop()
    cov.save()
    print("inputs replayed: " + ", ".join(f"{n} {c}" for n, c in counts.items()))
    cov.report(show_missing=True, skip_covered=True, precision=1)
    report = HERE / ".coverage.fuzz.json"
    cov.json_report(outfile=str(report))
    totals = json.loads(report.read_text())["totals"]
    report.unlink()
    print(
        f"mrtr_core branches reached: {totals['covered_branches']}/{totals['num_branches']} "
        f"({100 * totals['covered_branches'] / totals['num_branches']:.1f}%); statements "
        f"{totals['covered_lines']}/{totals['num_statements']} "
        f"({100 * totals['covered_lines'] / totals['num_statements']:.1f}%)"
    )
    if crashed:
        print(f"{crashed} inputs crashed", file=sys.stderr)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
