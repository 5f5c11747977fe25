"""``mypy`` on a user's files, against this work tree's ``mrtr_core`` and ``mrtr_transports``.

The project is installed in editable mode through an import hook, which mypy cannot
follow: it reads both packages from a folder of links named as they are installed
(``mrtr_transports`` is the ``transports`` folder), and the tests' ``support`` package
from ``tests/`` (a test file may be the program it checks).  The folder and mypy's caches live in
the temporary directory, one per work tree, so a run after the first one only checks
what changed.  One cache per set of options: mypy throws a module's cache entry away when
the options differ, so a ``--check-untyped-defs`` run between two ``--strict`` ones would
make every run check everything again (10 to 15 s each).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Seconds for one mypy run (a first one reads both packages).
MYPY_TIMEOUT = 300


def _home() -> Path:
    tree = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    home = Path(tempfile.gettempdir()) / f"mrtr-typecheck-{os.getuid()}-{tree}"
    packages = home / "packages"
    packages.mkdir(parents=True, exist_ok=True)
    for name, folder in (("mrtr_core", "mrtr_core"), ("mrtr_transports", "transports")):
        link = packages / name
        if not link.is_symlink():
            link.symlink_to(ROOT / folder, target_is_directory=True)
    return home


def run_mypy(files: Sequence[Path], *options: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """mypy on ``files`` (``options``: e.g. ``--strict``), run in ``cwd`` (without a config
    file there, mypy's defaults and ``options`` only); its exit status 2 (mypy itself
    failed) fails the test."""
    home = _home()
    mypy = Path(sys.executable).parent / "mypy"
    cache = home / "cache" / hashlib.sha256(" ".join(options).encode()).hexdigest()[:12]
    argv = [str(mypy), *options, "--cache-dir", str(cache), *map(str, files)]
    env = {**os.environ, "MYPYPATH": os.pathsep.join([str(home / "packages"), str(ROOT / "tests")])}
    ran = subprocess.run(
        argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=MYPY_TIMEOUT, check=False
    )
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    return ran


def mypy_errors(files: Sequence[Path], *options: str, cwd: Path) -> list[str]:
    """mypy's ``file:line: error: ...`` lines for ``files``, as :func:`run_mypy` runs it."""
    ran = run_mypy(files, *options, cwd=cwd)
    return [line for line in ran.stdout.splitlines() if ": error:" in line]
