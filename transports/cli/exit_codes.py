"""The exit codes of the ``mrtr`` command, written once (docs/cli.md shows the table).

A client error carries its code as a plain number (``ClientError.exit_code``):
the client does not depend on the command, the command reads the number as one
of these.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode"]


class ExitCode(IntEnum):
    """The exit codes of ``mrtr call`` (docs/cli.md); each client error carries its own.

    ``INTERRUPTED`` (130) is every ``mrtr`` command's answer to Ctrl-C.
    """

    RESULT = 0
    TOOL_ERROR = 1
    USAGE = 2
    PROTOCOL = 3
    TIMEOUT = 4
    ROUND_CAP = 5
    TRANSPORT = 6
    NO_ANSWER = 7
    #: Ctrl-C (SIGINT): the shell's 128 + 2.  Not a client error: the person stopped it.
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        """One line for ``mrtr call --help``."""
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.RESULT: "a result (printed as JSON on stdout)",
    ExitCode.TOOL_ERROR: "a tool result with isError: true",
    ExitCode.USAGE: "usage error (arguments, answers file)",
    ExitCode.PROTOCOL: "JSON-RPC or protocol error",
    ExitCode.TIMEOUT: "timed out",
    ExitCode.ROUND_CAP: "round cap (--max-rounds, --max-state-only-legs) exceeded",
    ExitCode.TRANSPORT: "transport failure (connect, server process died, HTTP)",
    ExitCode.NO_ANSWER: "cancelled, declined to answer, or no answer available",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
