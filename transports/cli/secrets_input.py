"""Where the client commands take a secret from: never from the command line.

The model: a command line is readable by every user of the machine (``ps``,
``/proc/PID/cmdline``) and lands in shell histories, so a bearer token or a
client secret given there is given away.  ``--token`` takes where the token is,
not the token: ``-`` (standard input), ``@PATH`` (a file) or ``env:NAME`` (an
environment variable); a literal value is a usage error that says why.  The
OAuth client secret comes from an environment variable only
(``--client-secret-env NAME``, ``MRTR_CLIENT_SECRET`` by default).

A token read is checked as RFC 6750's ``b64token`` (what a ``Bearer`` credential
may hold: no space, no control character, so nothing can be smuggled into the
header), bounded (:data:`MAX_TOKEN_BYTES`), and never quoted in an error.
"""

from __future__ import annotations

import os
import re
from typing import TextIO

from .._secret_source import SecretSourceError, is_secret_source, read_secret_source
from .connecting import UsageError

__all__ = ["DEFAULT_CLIENT_SECRET_ENV", "MAX_TOKEN_BYTES", "client_secret", "read_token"]

#: A token larger than this is no token (JWTs run to a few KiB).
MAX_TOKEN_BYTES = 16 * 1024
DEFAULT_CLIENT_SECRET_ENV = "MRTR_CLIENT_SECRET"
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_WHY = (
    "a command line is visible to every user of this machine (ps, /proc/PID/cmdline) "
    "and kept in shell histories: give -, @FILE or env:NAME"
)


def read_token(source: str, stdin: TextIO) -> str:
    """The bearer token ``--token SOURCE`` names (``-``, ``@PATH``, ``env:NAME``)."""
    if not is_secret_source(source):
        raise UsageError(f"--token takes where the token is, not the token: {_WHY}")
    try:
        text = read_secret_source(source, flag="--token", max_bytes=MAX_TOKEN_BYTES, stdin=stdin)
    except SecretSourceError as exc:
        raise UsageError(str(exc)) from None
    token = text.strip()
    if token[:7].lower() == "bearer ":
        token = token[7:].strip()
    if not _B64TOKEN.fullmatch(token):
        raise UsageError(
            f"--token {source}: does not hold one bearer token (letters, digits and "
            "-._~+/ then any =; no spaces or control characters)"
        )
    return token


def client_secret(variable: str) -> str | None:
    """The client secret in the environment variable ``variable`` (``None``: not set)."""
    return os.environ.get(variable) or None
