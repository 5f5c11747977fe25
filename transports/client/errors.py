"""What a client call can end with, other than its result.

Every error a :class:`~mrtr_transports.client.client.Client` raises is a
:class:`ClientError`, and each kind maps to one exit code of ``mrtr call``,
its class's ``exit_code`` (the command exits with ``type(error).exit_code``;
``mrtr_transports.cli.exit_codes.ExitCode`` is the command's whole table):

====================  ====  ===============================================================
class                 exit  meaning
====================  ====  ===============================================================
``CallError``         3     the server answered with a JSON-RPC error, or broke the protocol
``CallTimeout``       4     a leg, input or whole-flow budget ran out
``RoundCapExceeded``  5     the server asked for more rounds than ``max_rounds`` (or
                            ``max_state_only_legs``) allows
``TransportError``    6     the link failed: a child process died, a socket or HTTP failure
                            (``AuthorizationFailed``: no token the server accepts, a 401/403)
``InputUnavailable``  7     no answer for an input request (none available, declined to
                            answer, or the question was withdrawn)
``TaskCancelled``     3     the server cancelled the task the call became (SEP-2663)
====================  ====  ===============================================================

A declined or cancelled elicitation is an *answer* (the server gets it and
decides); ``InputUnavailable`` means no answer could be produced at all.  A
``CallError`` -32021 (the server needs a capability the client could not
declare, having no answer for it) is exit 7 as well: :func:`exit_code_of`.
A plain ``ClientError`` (the client would not go on, e.g. a leg the connection
refused to send) is exit 3.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import mrtr_core as m

#: ``"session"``: a 2025 HTTP server ended the session (404 to a request with its id).
TransportErrorKind = Literal[
    "spawn", "connect", "disconnect", "timeout", "http", "closed", "session"
]


class ClientError(Exception):
    """Base of everything a client call raises instead of returning its result.

    A plain ``ClientError`` is the client refusing to go on by itself (e.g. a
    leg the connection would not send): a protocol failure, exit 3.
    """

    #: The ``mrtr call`` exit code for this kind of failure (a number of
    #: ``cli.exit_codes.ExitCode``: the client does not import the command).
    exit_code: ClassVar[int] = 3


class CallError(ClientError):
    """The server answered the call with a JSON-RPC error, or broke the protocol.

    ``code``, ``message`` and ``data`` are the error object's (for a protocol
    violation, the code that best describes it, e.g. -32603 for an invalid
    ``input_required`` result or -32021 for an input request the client did not
    declare a capability for).
    """

    exit_code = 3

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message
        self.data = data


class CallTimeout(ClientError):
    """A time limit ran out: ``limit`` is ``"leg"``, ``"input"``, ``"total"`` or
    ``"handshake"`` (the server never answered ``server/discover``/``initialize``).

    ``elapsed`` is the time measured against that limit and ``budget`` the
    limit itself in seconds (``None`` when no budget was configured).
    """

    exit_code = 4

    def __init__(self, elapsed: float, budget: float | None, limit: str) -> None:
        budget_text = "no budget" if budget is None else f"budget {budget:g} s"
        super().__init__(f"the {limit} time limit ran out after {elapsed:.3f} s ({budget_text})")
        self.elapsed = elapsed
        self.budget = budget
        self.limit = limit


class RoundCapExceeded(ClientError):
    """The server kept asking past the round cap.

    ``rounds`` is the cap that was reached (``max_rounds``, or the cap named by
    ``limit_name``: ``"max_rounds"`` or ``"max_state_only_legs"``);
    ``last_result`` is the last ``input_required`` result received.
    """

    exit_code = 5

    def __init__(
        self,
        rounds: int,
        *,
        limit_name: str = "max_rounds",
        last_result: Any = None,
    ) -> None:
        super().__init__(f"the server asked for more rounds than {limit_name}={rounds} allows")
        self.rounds = rounds
        self.limit_name = limit_name
        self.last_result = last_result


class TransportError(ClientError):
    """The link to the server failed.

    ``kind`` tells the failures apart: ``"spawn"`` (the server command could not
    be started), ``"connect"`` (no connection could be made), ``"disconnect"``
    (the peer went away: a child process exited, a socket or stream closed),
    ``"timeout"`` (a transport-level timeout such as connecting), ``"http"`` (an
    HTTP status that carries no JSON-RPC answer, or a protocol the client does
    not speak) and ``"closed"`` (the client itself was closed).
    ``stderr_tail`` holds the last lines a stdio child wrote to stderr,
    ``exit_status`` its exit status (negative: killed by that signal) and
    ``status`` the HTTP status, where they apply.
    """

    exit_code = 6

    def __init__(
        self,
        message: str,
        stderr_tail: list[str] | None = None,
        *,
        kind: TransportErrorKind = "disconnect",
        exit_status: int | None = None,
        status: int | None = None,
    ) -> None:
        full = message
        if stderr_tail:
            full += "\n--- last lines of the server's stderr ---\n" + "\n".join(stderr_tail)
        super().__init__(full)
        self.message = message
        self.stderr_tail = stderr_tail
        self.kind = kind
        self.exit_status = exit_status
        self.status = status

    def copy(self) -> TransportError:
        """A fresh exception with the same facts and type (one failure is raised by many
        calls; an ``AuthorizationFailed`` stays one)."""
        return type(self)(
            self.message,
            list(self.stderr_tail) if self.stderr_tail is not None else None,
            kind=self.kind,
            exit_status=self.exit_status,
            status=self.status,
        )


class AuthorizationFailed(TransportError):
    """The OAuth client could not get a token the server accepts (the reason in the
    message, which never quotes a token, code or secret; the 401 or 403 as ``status``).
    Final: a client opening a session does not try another era after it."""


class InputUnavailable(ClientError):
    """No answer could be given to an input request.

    Raised by an input handler to say so (the call then fails with this error),
    and by the call itself.  ``key`` names the input request when known.
    """

    exit_code = 7

    def __init__(self, reason: str, *, key: str | None = None) -> None:
        super().__init__(reason if key is None else f"no answer for {key!r}: {reason}")
        self.reason = reason
        self.key = key


class TaskCancelled(ClientError):
    """The call became a task (SEP-2663) and the server cancelled it: there is no
    result.  ``task_id`` names the task, ``status_message`` is the server's reason, if
    it gave one.  (A task the caller cancels raises the caller's own cancellation.)"""

    exit_code = 3

    def __init__(self, task_id: str, status_message: str | None = None) -> None:
        reason = f": {status_message}" if status_message else ""
        super().__init__(f"the server cancelled task {task_id!r}{reason}")
        self.task_id = task_id
        self.status_message = status_message


def exit_code_of(error: ClientError) -> int:
    """The ``mrtr call`` exit code of ``error``: ``type(error).exit_code``, except that a
    ``CallError`` -32021 (the server needs input this client declared it cannot give)
    is exit 7 (no answer), as ``InputUnavailable`` is."""
    if isinstance(error, CallError) and error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY:
        return InputUnavailable.exit_code
    return type(error).exit_code
