"""``mrtr call``, ``get-prompt``, ``read``: one MRTR call, through every round it asks for.

The three methods that may answer ``input_required`` are three commands, each
shaped like its method (:data:`CALLS`): ``mrtr call TARGET TOOL [ARGS_JSON]``
(``tools/call``), ``mrtr get-prompt TARGET NAME [ARGS_JSON]`` (``prompts/get``,
the arguments strings) and ``mrtr read TARGET URI`` (``resources/read``).
They share everything else: the answers, the bounds, the trace, the headers,
the progress and log lines (:mod:`~mrtr_transports.cli.notices`).

The client settles the protocol era, sends the call, and when the server
answers ``input_required`` it asks :mod:`~mrtr_transports.cli.answers` for
each input request (the answers book, ``--decline-all``, then the terminal),
retries with the answers and the echoed ``requestState``, and so on until a
complete result, which is printed as JSON on stdout
(:mod:`~mrtr_transports.cli.json_text`: any depth of result prints).  Everything else
(prompts, errors) goes to stderr, so stdout is only ever the result.

The exit code is the result's (0, or 1 for ``isError: true``), 2 for usage
errors, or the client error's own ``exit_code``
(:mod:`mrtr_transports.client.errors`, where :class:`ExitCode` is the table);
Ctrl-C, at a prompt or anywhere else, is 130 (:mod:`~mrtr_transports.cli.interrupts`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import anyio

import mrtr_core as m
from mrtr_core import Verdict

from ..client import errors
from ..client.client import DEFAULT_HANDSHAKE_TIMEOUT
from ..client.errors import ClientError, exit_code_of
from ..client.oauth.loopback import AuthorizationTimedOut
from . import json_text
from .connecting import UsageError, open_target, parse_headers, parse_target
from .exit_codes import ExitCode
from .interrupts import is_interrupt
from .notices import Notices
from .signing_in import sign_in_plan, signed_in
from .terminal_text import one_line, shown
from .verdicts import VerdictFile

__all__ = [
    "CALLS",
    "CallStop",
    "UsageError",
    "client_failure",
    "describe_error",
    "exit_code_for",
    "failure_text",
    "parse_json_object",
    "parse_target",
    "print_result",
    "run_call",
    "write_out",
]

#: How many stderr lines of a dead server process are shown.
STDERR_TAIL_SHOWN = 20


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """``text`` as a JSON object; :class:`UsageError` naming ``what`` for anything else."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object")
    return value


# --- Running the call ---------------------------------------------------------------------


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaf_errors(inner)]
    return [exc]


def exit_code_for(exc: BaseException) -> int | None:
    """The exit code a client error means (its class's ``exit_code``), or ``None`` when
    ``exc`` is not a client error."""
    return exit_code_of(exc) if isinstance(exc, ClientError) else None


def describe_error(exc: BaseException) -> str:
    """One or a few lines saying what went wrong, for stderr."""
    if isinstance(exc, errors.CallError) and exc.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY:
        needed = exc.data.get("requiredCapabilities") if isinstance(exc.data, Mapping) else None
        return (
            "no answer: the server needs input this call cannot give "
            f"(it requires client capabilities {json_text.dumps(needed, indent=None)}; "
            f"error {exc.code}: "
            f"{one_line(exc.message)}): add answers with --answers FILE or --answer KEY=JSON, "
            "--root for roots, or run it on a terminal"
        )
    if isinstance(exc, errors.CallError):
        text = f"error {exc.code}: {one_line(exc.message)}"
        if exc.data is not None:
            text += f"\n  data: {one_line(json_text.dumps(exc.data, indent=None, default=str))}"
        return text
    if isinstance(exc, AuthorizationTimedOut):
        return f"timed out: {one_line(exc.message)} (--login-timeout)"
    if isinstance(exc, errors.AuthorizationFailed):
        return one_line(exc.message)  # ("authorization for URL failed: why")
    if isinstance(exc, errors.TransportError):
        text = f"transport failure: {one_line(exc.message)}"
        tail = list(exc.stderr_tail or [])[-STDERR_TAIL_SHOWN:]
        if tail:
            text += "\n  server stderr (last lines):\n" + "\n".join(
                f"    {one_line(t)}" for t in tail
            )
        return text
    if isinstance(exc, errors.CallTimeout):
        budget = "" if exc.budget is None else f" (budget {exc.budget:g} s)"
        return f"timed out: {exc.limit} limit after {exc.elapsed:.3g} s{budget}"
    if isinstance(exc, errors.RoundCapExceeded):
        return f"round cap exceeded: the server asked for more than {exc.limit_name}={exc.rounds}"
    if isinstance(exc, errors.InputUnavailable):
        return shown(str(exc))  # (it names the server's key)
    return shown(str(exc)) or type(exc).__name__


@dataclass(frozen=True)
class CallKind:
    """One of the commands that run an MRTR call: its method and how it prints."""

    method: str
    #: The result's ``isError: true`` is exit 1 (tools only: a prompt or resource has none).
    tool: bool = False


#: The commands that run a call, by name.
CALLS: Mapping[str, CallKind] = {
    "call": CallKind("tools/call", tool=True),
    "get-prompt": CallKind("prompts/get"),
    "read": CallKind("resources/read"),
}


def call_params(args: argparse.Namespace) -> dict[str, Any]:
    """The params of the command's request, from its positional arguments."""
    if args.command == "read":
        return {"uri": args.uri}
    arguments = parse_json_object(args.arguments, "ARGS_JSON")
    if args.command == "get-prompt":
        wrong = sorted(k for k, v in arguments.items() if not isinstance(v, str))
        if wrong:
            raise UsageError(
                f"ARGS_JSON: prompt arguments are strings; {', '.join(wrong)} "
                'is not (write {"count": "3"}, not {"count": 3})'
            )
        return {"name": args.name, "arguments": arguments}
    return {"name": args.tool, "arguments": arguments}


def client_options(args: argparse.Namespace, answerer: Any, notices: Notices) -> dict[str, Any]:
    """The client options every client command shares: its era, its answers (if it
    answers), and unless ``--quiet`` the log level it asks for and the log lines."""
    options: dict[str, Any] = {
        "info": {"name": "mrtr-cli", "version": package_version()},
        "era": args.era,
        # (--timeout shortens the handshake's own bound, never lengthens it)
        "handshake_timeout": min(DEFAULT_HANDSHAKE_TIMEOUT, args.timeout or math.inf),
    }
    if answerer is not None:
        options["answer"] = answerer
        options["capabilities"] = answerer.capabilities()
    if not args.quiet:
        options["log_level"] = args.log_level
        options["on_notification"] = notices.on_notification
    return options


class CallStop:
    """What Ctrl-C stops in a call command (``run_stoppable``'s ``on_stop``).

    While the call runs, the first Ctrl-C cancels the call alone, inside its client:
    the link is still up, so the call is cancelled on the wire (a leg's cancellation,
    a task's ``tasks/cancel``) before the command ends, as Ctrl-C ends it (130).
    Before the call, and at the second Ctrl-C, it cancels everything (``main``).
    """

    def __init__(self) -> None:
        self.main: anyio.CancelScope | None = None
        self._call: anyio.CancelScope | None = None
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True
        scope = self._call if self._call is not None else self.main
        if scope is not None:
            scope.cancel()

    @contextlib.contextmanager
    def calling(self) -> Iterator[anyio.CancelScope]:
        """The scope the call runs in (cancelled by :meth:`stop`)."""
        with anyio.CancelScope() as scope:
            self._call = scope
            if self._stopped:
                scope.cancel()
            try:
                yield scope
            finally:
                self._call = None


async def run_call(
    args: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stop: CallStop | None = None,
) -> int:
    """``mrtr call``, ``mrtr get-prompt`` or ``mrtr read`` (``args.command``); the exit code.

    ``stop`` is what Ctrl-C cancels (:class:`CallStop`)."""
    from .answers import AnswerBook, AnswersError, CliAnswerer, Terminal
    from .trace import NdjsonTracer

    out = stdout or sys.stdout
    err = stderr or sys.stderr
    start = anyio.current_time()
    kind_of_call = CALLS[args.command]

    def fail(code: int, message: str) -> int:
        # (each part from the server is made safe where it is composed; this is the backstop)
        err.write(f"mrtr {args.command}: {shown(message)}\n")
        err.flush()
        return code

    try:
        kind, where = parse_target(args.target)
        headers = parse_headers(args.header, kind)
        sign_in = sign_in_plan(args, kind, headers, sys.stdin)
        headers = sign_in.headers(headers)
        params = call_params(args)
        book = AnswerBook.load(args.answers, args.answer, args.root)
    except (UsageError, AnswersError) as exc:
        return fail(ExitCode.USAGE, str(exc))
    answerer = CliAnswerer(book, terminal=Terminal.from_stdio(), decline_all=args.decline_all)
    try:
        tracer = NdjsonTracer.open(args.trace, start=start) if args.trace else None
    except OSError as exc:
        return fail(ExitCode.USAGE, f"--trace {args.trace}: {exc.strerror or exc}")

    notices = Notices(err, None if args.quiet else args.log_level)
    options = client_options(args, answerer, notices)
    options["tracer"] = tracer
    on_progress = None if args.quiet else notices.on_progress
    verdicts = VerdictFile(args.verdicts) if args.verdicts else None
    if verdicts is not None and args.era == "auto":  # (an explicit --era wins)
        options["prior"] = verdicts.prior(args.target)
    on_task_status = None if args.quiet else notices.on_task_status
    learned: Verdict | None = None
    try:
        async with signed_in(sign_in, args.target, err, f"mrtr {args.command}") as auth:
            if auth is not None:
                options["auth"] = auth
            async with open_target(kind, where, headers, options) as client:
                try:
                    # --timeout is the server's time on each leg (and the tools/list before
                    # it): a person's time at a prompt falls between legs, never in one.
                    # Ctrl-C cancels the call alone first (stop), the client still up.
                    with (stop or CallStop()).calling() as call_scope:
                        result = await client.call(
                            kind_of_call.method,
                            params,
                            leg_timeout=args.timeout,
                            max_rounds=args.max_rounds,
                            max_state_only_legs=args.max_state_only_legs,
                            url_wait_timeout=args.url_wait_timeout,
                            on_progress=on_progress,
                            on_task_status=on_task_status,
                        )
                finally:
                    learned = client.verdict  # (a wrong prior re-probes on the first request)
        if call_scope.cancelled_caught:
            return ExitCode.INTERRUPTED  # (run_stoppable says so: "interrupted", 130)
    except BaseException as exc:  # sorted below; the rest re-raised
        code = client_failure(exc)
        if code is None:
            raise
        return fail(code, failure_text(exc, args.timeout))
    finally:
        if tracer is not None:
            tracer.close()
        if verdicts is not None and learned is not None:
            verdicts.remember(args.target, learned)
    tool_error = kind_of_call.tool and result.get("isError") is True
    return print_result(out, result, ExitCode.TOOL_ERROR if tool_error else ExitCode.RESULT, fail)


def client_failure(exc: BaseException) -> int | None:
    """The exit code of a client error ``exc`` holds; ``None``: re-raise ``exc``."""
    if is_interrupt(exc) or anyio.current_effective_deadline() == -math.inf:
        # Ctrl-C (at a prompt, or cancelling the whole run): whatever the client
        # failed with while it was torn down is not what the command ends with.
        return None
    for leaf in _leaf_errors(exc):
        code = exit_code_for(leaf)
        if code is not None:
            return code
    return None


def failure_text(exc: BaseException, deadline: float | None = None) -> str:
    """What the first client error in ``exc`` says; a timeout of the server's time
    names ``--timeout`` (``deadline`` seconds), and how to change it."""
    for leaf in _leaf_errors(exc):
        if exit_code_for(leaf) is None:
            continue
        if isinstance(leaf, errors.CallTimeout) and leaf.limit == "handshake":
            return (
                f"timed out: the server did not answer the handshake within {leaf.budget:g} s "
                f"(at most {DEFAULT_HANDSHAKE_TIMEOUT:g} s, less with a shorter --timeout)"
            )
        if isinstance(leaf, errors.CallTimeout) and leaf.limit in _SERVERS_TIME:
            return (
                f"timed out: the server did not answer {_SERVERS_TIME[leaf.limit]} within "
                f"{leaf.budget or deadline or 0:g} s (--timeout {deadline or 0:g}; "
                "--timeout SEC to wait longer, 0 for no deadline)"
            )
        return describe_error(leaf)
    return str(exc)  # (not reached: only called with a client error inside)


#: The limits of a ``CallTimeout`` that are the server's time (``--timeout``), and what
#: it did not answer (``"input"`` is the wait for a person: ``--url-wait-timeout``).
_SERVERS_TIME = {
    "leg": "a leg of the call",
    "total": "a request",
}


def print_result(out: TextIO, result: Any, code: int, fail: Callable[[int, str], int]) -> int:
    """``result`` as JSON on ``out``; ``code``, even when whoever reads ``out`` left."""
    # (any depth of result prints: json.dumps recursed per level)
    return write_out(out, json_text.dumps(result, indent=2), code, fail)


def write_out(out: TextIO, text: str, code: int, fail: Callable[[int, str], int]) -> int:
    """``text`` and a newline on ``out``; ``code``, even when whoever reads ``out`` left."""
    try:
        out.write(text + "\n")
        out.flush()
    except BrokenPipeError:
        # Whoever read our stdout is gone (`mrtr call ... | head -1`): the call's own
        # exit code stands, and nothing may try to write there again.
        _discard_stdout(out)
        return fail(code, "stdout was closed before the whole result was written")
    return code


def _discard_stdout(out: TextIO) -> None:
    """Point ``out`` (when it is the process's stdout) at /dev/null, so the flush at exit
    does not fail on the broken pipe once more."""
    if out is sys.stdout:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def package_version() -> str:
    try:
        from importlib.metadata import version

        return version("mrtr")
    except Exception:  # not installed as a distribution
        return "0"
