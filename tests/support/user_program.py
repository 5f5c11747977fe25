"""The user's program of ``help(mrtr_transports)``, as a file a test can write or run."""

from __future__ import annotations

import mrtr_transports


def greet_program() -> str:
    """The example block after "save it as ``greet.py``" in the package's docstring."""
    doc = mrtr_transports.__doc__ or ""
    block = doc.split("(save it as ``greet.py``)::\n\n", 1)[1].split("\n\nServe it", 1)[0]
    return "\n".join(line.removeprefix("    ") for line in block.splitlines()) + "\n"
