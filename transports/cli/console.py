"""The ``mrtr`` console script: check that the ``transports`` extra is installed, then run.

``pip install mrtr`` installs the sans-IO core alone, yet pip installs the ``mrtr``
script with it (a script cannot depend on an extra).  Without anyio, trio, h11 and wsproto
the command could only die with ``No module named 'trio'``; this shim, which imports
nothing but the standard library, says instead in one line what to install, and exits
2 (nothing ran, as for a usage error).  With the extra it is :func:`mrtr_transports.cli.main.main`.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

#: The modules of the ``transports`` extra (pyproject.toml) the command imports.
EXTRA_MODULES = ("anyio", "trio", "h11", "wsproto")
INSTALL_EXTRA = "pip install 'mrtr[transports]'"
#: Nothing ran: the exit code of a usage error (``ExitCode.USAGE``).
MISSING_EXTRA_EXIT = 2


def missing_modules() -> list[str]:
    """The modules of the ``transports`` extra that cannot be imported here."""
    return [name for name in EXTRA_MODULES if importlib.util.find_spec(name) is None]


def main(argv: Sequence[str] | None = None) -> int:
    missing = missing_modules()
    if missing:
        print(
            f"mrtr: the command needs the transports extra ({', '.join(missing)} missing):"
            f" {INSTALL_EXTRA}",
            file=sys.stderr,
        )
        return MISSING_EXTRA_EXIT
    from .main import main as run  # imports anyio: only once we know it is there

    return run(argv)
