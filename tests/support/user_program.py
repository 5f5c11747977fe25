"""A user's programs, as files a test can write or run: the one of ``help(mrtr_transports)``,
and the typed one that hands its ``McpApp`` to every host and the test client."""

from __future__ import annotations

from pathlib import Path

import mrtr_transports


def greet_program() -> str:
    """The example block after "save it as ``greet.py``" in the package's docstring."""
    doc = mrtr_transports.__doc__ or ""
    block = doc.split("(save it as ``greet.py``)::\n\n", 1)[1].split("\n\nServe it", 1)[0]
    return "\n".join(line.removeprefix("    ") for line in block.splitlines()) + "\n"


def typed_program() -> str:
    """``support/typed_user_app.py``: each answer typed by its ask, the app on every host;
    run, it calls its tools through ``TestClient`` and prints the results as JSON."""
    return (Path(__file__).parent / "typed_user_app.py").read_text(encoding="utf-8")
