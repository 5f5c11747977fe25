"""Run one fuzz target under atheris (libFuzzer): ``python tests/fuzz/fuzz_one.py TARGET
[libFuzzer flags and corpus folders]``.  ``run.py`` calls this in a subprocess per target.

mrtr_core is imported inside ``atheris.instrument_imports`` so libFuzzer sees its
branches (coverage-guided); the target functions live in ``targets.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports(include=["mrtr_core"]):
    import mrtr_core  # noqa: F401  (instrumented here, before targets imports it)

import targets


def main() -> None:
    name = sys.argv[1]
    target = targets.TARGETS[name]
    # Deep inputs recurse: keep Python's limit, and the C stack libFuzzer gives us.
    atheris.Setup([sys.argv[0], *sys.argv[2:]], lambda data: targets.run(target, data))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
