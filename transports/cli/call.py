"""``mrtr call``: one MCP client making one ``tools/call``, through every round it asks for.

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
import json
import math
import os
import re
import shlex
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import trio

import mrtr_core as m
from mrtr_core.connection import Verdict

from ..client import errors
from ..client.errors import ClientError, ExitCode, exit_code_of
from . import json_text
from .interrupts import is_interrupt
from .verdicts import VerdictFile

#: Extra time the whole command gets past ``--timeout`` for the client to report
#: its own, more precise, timeout before the command's backstop fires.
TIMEOUT_GRACE = 0.5
#: How many stderr lines of a dead server process are shown.
STDERR_TAIL_SHOWN = 20


class UsageError(Exception):
    """A command-line mistake found after parsing (exit 2)."""


def parse_target(target: str) -> tuple[str, str | list[str]]:
    """``("http", url)``, ``("ws", url)`` or ``("stdio", argv)``; :class:`UsageError` else."""
    if target.startswith("stdio:"):
        try:
            argv = shlex.split(target[len("stdio:") :])
        except ValueError as exc:
            raise UsageError(f"TARGET {target!r}: {exc}") from exc
        if not argv:
            raise UsageError("TARGET stdio: needs a command, e.g. stdio:'mrtr serve --stdio'")
        return "stdio", argv
    if re.match(r"https?://[^/\s]", target, re.IGNORECASE):
        return "http", target
    if re.match(r"ws://[^/\s]", target, re.IGNORECASE):
        return "ws", target
    raise UsageError(
        f"TARGET {target!r}: expected http(s)://... or stdio:COMMAND ARGS... or ws://..."
    )


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
    if isinstance(exc, errors.CallError) and exc.code == m.protocol.MISSING_CLIENT_CAPABILITY:
        needed = exc.data.get("requiredCapabilities") if isinstance(exc.data, Mapping) else None
        return (
            "no answer: the server needs input this call cannot give "
            f"(it requires client capabilities {json_text.dumps(needed, indent=None)}; "
            f"error {exc.code}: "
            f"{exc.message}): add answers with --answers FILE or --answer KEY=JSON, "
            "--root for roots, or run it on a terminal"
        )
    if isinstance(exc, errors.CallError):
        text = f"error {exc.code}: {exc.message}"
        if exc.data is not None:
            text += f"\n  data: {json_text.dumps(exc.data, indent=None, default=str)}"
        return text
    if isinstance(exc, errors.TransportError):
        text = f"transport failure: {exc.message}"
        tail = list(exc.stderr_tail or [])[-STDERR_TAIL_SHOWN:]
        if tail:
            text += "\n  server stderr (last lines):\n" + "\n".join(f"    {t}" for t in tail)
        return text
    if isinstance(exc, errors.CallTimeout):
        budget = "" if exc.budget is None else f" (budget {exc.budget:g} s)"
        return f"timed out: {exc.limit} limit after {exc.elapsed:.3g} s{budget}"
    if isinstance(exc, errors.RoundCapExceeded):
        return f"round cap exceeded: the server asked for more than {exc.limit_name}={exc.rounds}"
    if isinstance(exc, errors.InputUnavailable):
        return str(exc)
    return str(exc) or type(exc).__name__


async def run_call(
    args: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """``mrtr call``; returns the exit code."""
    from .answers import AnswerBook, AnswersError, CliAnswerer, Terminal
    from .trace import NdjsonTracer

    out = stdout or sys.stdout
    err = stderr or sys.stderr
    start = trio.current_time()

    def fail(code: int, message: str) -> int:
        err.write(f"mrtr call: {message}\n")
        err.flush()
        return code

    try:
        kind, where = parse_target(args.target)
        arguments = parse_json_object(args.arguments, "ARGS_JSON")
        book = AnswerBook.load(args.answers, args.answer, args.root)
    except (UsageError, AnswersError) as exc:
        return fail(ExitCode.USAGE, str(exc))
    answerer = CliAnswerer(book, terminal=Terminal.from_stdio(), decline_all=args.decline_all)
    try:
        tracer = NdjsonTracer.open(args.trace, start=start) if args.trace else None
    except OSError as exc:
        return fail(ExitCode.USAGE, f"--trace {args.trace}: {exc.strerror or exc}")

    options: dict[str, Any] = {
        "answer": answerer,
        "capabilities": answerer.capabilities(),
        "info": {"name": "mrtr-cli", "version": _version()},
        "tracer": tracer,
        "era": args.era,
    }
    verdicts = VerdictFile(args.verdicts) if args.verdicts else None
    if verdicts is not None and args.era == "auto":  # (an explicit --era wins)
        options["prior"] = verdicts.prior(args.target)
    learned: Verdict | None = None
    budget = math.inf if args.timeout is None else args.timeout
    too_long = f"timed out: the call took longer than --timeout {budget:g} s"
    result: Mapping[str, Any] | None = None
    try:
        with trio.move_on_after(budget + TIMEOUT_GRACE) as backstop:
            if kind == "stdio":
                from ..client.stdio import open_stdio_client

                assert isinstance(where, list)
                opener = open_stdio_client(where, **options)
            elif kind == "ws":
                from ..client.ws import open_ws_client

                assert isinstance(where, str)
                opener = open_ws_client(where, **options)
            else:
                from ..client.http import open_http_client

                assert isinstance(where, str)
                opener = open_http_client(where, **options)
            async with opener as client:
                remaining = None
                if args.timeout is not None:
                    remaining = max(0.001, start + budget - trio.current_time())
                try:
                    result = await client.call_tool(
                        args.tool,
                        arguments,
                        timeout=remaining,
                        max_rounds=args.max_rounds,
                        max_state_only_legs=args.max_state_only_legs,
                        url_wait_timeout=args.url_wait_timeout,
                    )
                finally:
                    learned = client.verdict  # (a wrong prior re-probes on the first request)
    except BaseException as exc:  # sorted below; the rest re-raised
        if is_interrupt(exc) or trio.current_effective_deadline() == -math.inf:
            # Ctrl-C (at a prompt, or cancelling the whole run): whatever the client
            # failed with while it was torn down is not what the command ends with.
            raise
        for leaf in _leaf_errors(exc):
            code = exit_code_for(leaf)
            if code is not None and code == ExitCode.TIMEOUT and args.timeout is not None:
                # The client counts what was left of the budget after connecting: say the whole.
                return fail(code, too_long)
            if code is not None:
                return fail(code, describe_error(leaf))
        raise
    finally:
        if tracer is not None:
            tracer.close()
        if verdicts is not None and learned is not None:
            verdicts.remember(args.target, learned)
    if backstop.cancelled_caught or result is None:
        return fail(ExitCode.TIMEOUT, too_long)
    code = ExitCode.TOOL_ERROR if result.get("isError") is True else ExitCode.RESULT
    text = json_text.dumps(result, indent=2)  # any depth: json.dumps recursed per level
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


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mrtr")
    except Exception:  # not installed as a distribution
        return "0"
