"""Where a secret named on a command line comes from: the one rule every flag that takes
one follows (``--token``, ``--auth-client-secret``, ``--state-keys``).

A command line is readable by every user of the machine (``ps``, ``/proc/PID/cmdline``)
and lands in shell histories, so such a flag names where the secret is, never the
secret: ``env:NAME`` (an environment variable), ``@PATH`` (a file), ``-`` (standard
input, where the flag allows it), or a bare ``PATH`` (where the flag always took a
file).  The text is read bounded (``max_bytes``: a file or a stream is never read
whole), must be UTF-8, and is never quoted in an error; an unset or empty variable is
an error of its own.  The caller reads what the text means (one token, one line, a
keys document).
"""

from __future__ import annotations

import os
from typing import TextIO

__all__ = ["SecretSourceError", "is_secret_source", "read_secret_source"]


class SecretSourceError(ValueError):
    """The source named holds no text to read; the message says which flag and why."""


def is_secret_source(source: str) -> bool:
    """``source`` names where a secret is (``-``, ``@PATH``, ``env:NAME``) rather than
    being one: what a flag that takes no bare path checks before reading."""
    return source == "-" or source.startswith(("@", "env:"))


def read_secret_source(
    source: str, *, flag: str, max_bytes: int, stdin: TextIO | None = None
) -> str:
    """The text at ``source`` for ``flag`` (see the module docstring); ``stdin`` is the
    stream ``-`` reads (``None``: the flag takes no ``-``, which is then a path)."""
    where = f"{flag} {source}"
    if source.startswith("env:"):
        name = source[4:]
        text = os.environ.get(name)
        if not text:
            raise SecretSourceError(
                f"{where}: the environment variable {name!r} is not set or empty"
            )
    elif source == "-" and stdin is not None:
        text = stdin.read(max_bytes + 1)
    else:
        path = source[1:] if source.startswith("@") else source
        try:
            with open(path, "rb") as file:
                raw = file.read(max_bytes + 1)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise SecretSourceError(f"{where}: cannot read it ({reason})") from None
        if len(raw) > max_bytes:
            raise SecretSourceError(f"{where}: more than {max_bytes} bytes, not a secret")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SecretSourceError(f"{where}: not UTF-8 text") from None
    if len(text) > max_bytes:
        raise SecretSourceError(f"{where}: more than {max_bytes} bytes, not a secret")
    return text
