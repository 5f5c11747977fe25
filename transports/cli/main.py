"""``mrtr``: serve an app, call a tool through every round it asks for, inspect a sealed state.

Commands (each in its own module; docs/cli.md describes them)::

    mrtr serve [--stdio | --http HOST:PORT | --ws HOST:PORT] [--app MODULE:ATTR|FILE.py:ATTR]
               [--log-level LEVEL] [--no-access-log] [--drain-timeout SEC] [--path PATH]
               [--health-path PATH|off] [--allow-origin ORIGIN ...] [--allow-host HOST ...]
               [--trusted-proxy CIDR ...] [--state-keys FILE|env:NAME] ...
    mrtr call [--answers FILE] [--answer KEY=JSON ...] [--decline-all] [--root URI ...]
              [--trace FILE] [--max-rounds N] [--max-state-only-legs N] [--timeout SEC]
              [--url-wait-timeout SEC]
              TARGET TOOL [ARGS_JSON]
    mrtr state inspect [--state-keys FILE|env:NAME] [--key [ID:]SECRET ...] [--key-id ID]
              [--method M] [--params JSON] [--principal P] [--now SECONDS] TOKEN

* ``mrtr serve`` is the one serve entry, :mod:`mrtr_transports.server.entry`
  (the same as ``python -m mrtr_transports.server --stdio`` and
  ``python -m mrtr_transports.server --http 127.0.0.1:0``);
* ``mrtr call`` is :mod:`mrtr_transports.cli.call`.  ``TARGET`` is an
  ``http://`` or ``https://`` URL (Streamable HTTP), a ``ws://`` URL
  (WebSocket) or ``stdio:COMMAND
  ARGS...``, a server command split with POSIX shell-word rules
  (``stdio:"mrtr serve --stdio"``).  Its exit codes are
  :class:`mrtr_transports.client.errors.ExitCode`: 0 a result, 1 a tool error,
  2 usage, each client error's own ``exit_code`` (3 protocol, 4 timeout,
  5 round cap, 6 transport, 7 no answer), and 130 for Ctrl-C;
* ``mrtr state inspect`` is :mod:`mrtr_transports.cli.state`: exit 0 when
  the token passes every check it could make, 1 when one fails, 2 on usage
  errors.

Ctrl-C ends every command with exit 130 and one line on stderr, never a
traceback; SIGTERM stops ``mrtr serve`` cleanly, exit 0; either signal lets the
server drain its calls in flight first (``--drain-timeout``;
:mod:`mrtr_transports.cli.interrupts`).
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Sequence
from typing import NoReturn

from mrtr_core.engine import DEFAULT_URL_WAIT

from ..client.errors import ExitCode
from ..server.entry import MRTR_SERVE
from ..server.entry import add_arguments as add_serve_arguments
from ..server.entry import serve as run_serve
from .call import run_call
from .interrupts import interrupted, run_stoppable
from .state import run_state_inspect

EXIT_CODES_HELP = "exit codes:\n" + "".join(
    f"  {code.value}  {code.meaning}\n" for code in ExitCode
)

ANSWERS_HELP = """\
answers: an entry named after an input request's key answers that key;
otherwise the entry named after its method answers it: elicitation/create,
elicitation/create#url (URL mode), sampling/createMessage, roots/list.
Keys win over methods.  With no answer and a terminal on stdin, mrtr asks.
"""


# --- Arguments --------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message}\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mrtr",
        description="Serve MCP tools and call them through multi round-trip flows.",
        epilog="Run `mrtr COMMAND --help` for each command.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    serve = commands.add_parser(
        "serve",
        help="serve an app over stdio or Streamable HTTP",
        description=MRTR_SERVE.description,
    )
    add_serve_arguments(serve, MRTR_SERVE)

    call = commands.add_parser(
        "call",
        help="call a tool, answering the input it asks for",
        description="Call TOOL on TARGET and print the final result as JSON.",
        epilog=ANSWERS_HELP + "\n" + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    call.add_argument("--answers", metavar="FILE", help="a JSON object of answers")
    call.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="one more answer entry (repeatable; wins over --answers)",
    )
    call.add_argument(
        "--decline-all", action="store_true", help="decline every elicitation not answered"
    )
    call.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="URI",
        help="a file:// root to answer roots/list with (repeatable)",
    )
    call.add_argument("--trace", metavar="FILE", help="write every message as NDJSON")
    call.add_argument(
        "--max-rounds",
        type=_positive_int,
        default=10,
        metavar="N",
        help="most input rounds (default 10)",
    )
    call.add_argument(
        "--max-state-only-legs",
        type=_positive_int,
        default=10,
        metavar="N",
        help="most legs in a row that carry only requestState, no answers (default 10)",
    )
    call.add_argument(
        "--timeout", type=_positive_seconds, metavar="SEC", help="budget for the whole call"
    )
    call.add_argument(
        "--url-wait-timeout",
        type=_positive_seconds,
        default=DEFAULT_URL_WAIT,
        metavar="SEC",
        help="after you consent to open a URL, how long to wait for the server to see "
        f"the interaction finish (default {DEFAULT_URL_WAIT:g})",
    )
    call.add_argument(
        "--era",
        choices=("auto", "modern", "legacy"),
        default="auto",
        help="auto: probe server/discover, fall back to a 2025 session (default); "
        "modern: 2026-07-28 at once; legacy: a 2025 initialize at once",
    )
    call.add_argument(
        "--verdicts",
        metavar="FILE",
        help="remember each target's era in FILE (JSON) and skip the probe next time",
    )
    call.add_argument(
        "target", metavar="TARGET", help="http(s)://URL, ws://URL or stdio:COMMAND ARGS..."
    )
    call.add_argument("tool", metavar="TOOL", help="the tool's name")
    call.add_argument(
        "arguments", metavar="ARGS_JSON", nargs="?", default="{}", help="a JSON object"
    )

    state = commands.add_parser(
        "state",
        help="work with sealed requestState tokens",
        description="Offline tools for sealed requestState tokens.",
    )
    state_commands = state.add_subparsers(
        dest="state_command", metavar="SUBCOMMAND", parser_class=_Parser
    )
    state_commands.required = True
    inspect = state_commands.add_parser(
        "inspect",
        help="say which check a requestState token fails",
        description=(
            "Open a sealed requestState token offline and say which check fails: "
            "malformed, unsupported version, unknown key, bad signature (tampered), "
            "expired, wrong method, wrong params (another request), wrong principal. "
            "Prints the opened payload when every check passes."
        ),
        epilog=(
            "keys: --state-keys FILE or env:NAME, the document the server was given; "
            "and/or --key ID:SECRET, or --key SECRET for the key id the token names "
            "(or --key-id). SECRET is base64 or base64url (padding optional) or hex:HEX; "
            "--key @FILE reads it from FILE. Without --method/--params/--principal those "
            "bindings are not checked; --now defaults to the wall clock (the sealing "
            "server's clock must be the same kind for expiry to mean anything)."
        ),
    )
    inspect.add_argument(
        "--key", action="append", default=[], metavar="[ID:]SECRET", help="a verifying key"
    )
    inspect.add_argument(
        "--state-keys",
        metavar="FILE|env:NAME",
        help="the keys document `mrtr serve --state-keys` seals with (every key in it verifies)",
    )
    inspect.add_argument("--key-id", metavar="ID", help="the id of a --key given without one")
    inspect.add_argument("--method", help="the request's method (e.g. tools/call)")
    inspect.add_argument("--params", metavar="JSON", help="the request's params (name, arguments)")
    inspect.add_argument("--principal", help="the principal the server authenticated")
    inspect.add_argument("--now", type=float, metavar="SECONDS", help="the time to judge expiry")
    inspect.add_argument("token", metavar="TOKEN", help="the requestState token")
    return parser


# --- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mrtr`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    prog = f"mrtr {args.command}"
    try:
        if args.command == "serve":
            return run_serve(MRTR_SERVE, args)  # Ctrl-C and SIGTERM: see the serve entry
        if args.command == "call":
            return run_stoppable(prog, functools.partial(run_call, args))
        return run_state_inspect(args)
    except KeyboardInterrupt:  # outside trio.run: e.g. while importing what a command needs
        return interrupted(prog)


if __name__ == "__main__":
    sys.exit(main())
