"""``mrtr``: serve an app, call a tool through every round it asks for, inspect a sealed state.

Commands (each in its own module; docs/cli.md describes them)::

    mrtr serve [--stdio | --http HOST:PORT | --ws HOST:PORT] [--loop trio|asyncio]
               [--app MODULE:ATTR|FILE.py:ATTR]
               [--log-level LEVEL] [--no-access-log] [--drain-timeout SEC] [--path PATH]
               [--health-path PATH|off] [--allow-origin ORIGIN ...] [--allow-host HOST ...]
               [--trusted-proxy CIDR ...] [--state-keys FILE|env:NAME]
               [--single-use URL] [--task-store URL] [--task-id-prefix NAME] ...
    mrtr call [--answers FILE] [--answer KEY=JSON ...] [--decline-all] [--root URI ...]
              [--trace FILE] [--max-rounds N] [--max-state-only-legs N] [--timeout SEC]
              [--url-wait-timeout SEC] [--header NAME:VALUE ...] [--quiet]
              [--log-level LEVEL] [--era ERA] [--verdicts FILE]
              [--token -|@FILE|env:NAME] [--token-store PATH] [--no-browser]
              [--login-timeout SEC] [--client-id ID] [--client-secret-env NAME]
              [--client-metadata-url URL]
              TARGET TOOL [ARGS_JSON]
    mrtr get-prompt [the options of call] TARGET NAME [ARGS_JSON]
    mrtr read [the options of call] TARGET URI
    mrtr list [--header NAME:VALUE ...] [--era ERA] [--timeout SEC] [--json]
              TARGET [tools|prompts|resources|templates]
    mrtr auth list [--token-store PATH]
    mrtr auth forget [--token-store PATH] (URL | --all)
    mrtr state inspect [--state-keys FILE|env:NAME] [--key [ID:]SECRET ...] [--key-id ID]
              [--method M] [--params JSON] [--principal P] [--now SECONDS] TOKEN
    mrtr --version

* ``mrtr serve`` is the one command line that starts a server,
  :mod:`mrtr_transports.cli.serve` (``python -m mrtr_transports serve`` is the same);
* ``mrtr call``, ``mrtr get-prompt`` and ``mrtr read`` are
  :mod:`mrtr_transports.cli.call` (``tools/call``, ``prompts/get``,
  ``resources/read``: each through every input round), ``mrtr list`` is
  :mod:`mrtr_transports.cli.listing`.  ``TARGET`` is an
  ``http://`` or ``https://`` URL (Streamable HTTP), a ``ws://`` URL
  (WebSocket) or ``stdio:COMMAND
  ARGS...``, a server command split with POSIX shell-word rules
  (``stdio:"mrtr serve --stdio"``).  Its exit codes are
  :class:`mrtr_transports.client.errors.ExitCode`: 0 a result, 1 a tool error,
  2 usage, each client error's own ``exit_code`` (3 protocol, 4 timeout,
  5 round cap, 6 transport, 7 no answer), and 130 for Ctrl-C;
* an ``http(s)://`` TARGET that answers 401 gets an OAuth sign-in in the
  person's browser (:mod:`mrtr_transports.cli.signing_in`); ``mrtr auth list``
  and ``mrtr auth forget`` are :mod:`mrtr_transports.cli.auth_command` (exit 0,
  or 2 on usage errors);
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
import sys
from collections.abc import Sequence
from typing import NoReturn

import anyio

from .arguments import (
    ANSWERS_HELP,
    EXIT_CODES_HELP,
    NOTICES_HELP,
    add_call_arguments,
    add_list_arguments,
    version_text,
)
from .auth_command import add_auth_arguments, run_auth
from .call import CALLS, CallStop, package_version, run_call
from .exit_codes import ExitCode
from .interrupts import interrupted, run_stoppable
from .serve import DESCRIPTION as SERVE_DESCRIPTION
from .serve import serve as run_serve
from .serve_options import add_arguments as add_serve_arguments
from .state import run_state_inspect

# --- Arguments --------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``--version``: one line as written (argparse's own action wraps it to the terminal)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        sys.stdout.write(version_text(package_version()) + "\n")
        sys.stdout.flush()
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mrtr",
        description="Serve MCP tools and call them through multi round-trip flows.",
        epilog="Run `mrtr COMMAND --help` for each command.",
    )
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="print the version and the protocol revisions it speaks, and exit",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    serve = commands.add_parser(
        "serve",
        help="serve an app over stdio, Streamable HTTP or WebSocket",
        description=SERVE_DESCRIPTION,
    )
    add_serve_arguments(serve)

    calls = {
        "call": ("call a tool, answering the input it asks for", "Call TOOL on TARGET"),
        "get-prompt": (
            "get a prompt (prompts/get), answering the input it asks for",
            "Get prompt NAME from TARGET",
        ),
        "read": (
            "read a resource (resources/read), answering the input it asks for",
            "Read the resource at URI from TARGET",
        ),
    }
    for name, (summary, description) in calls.items():
        command = commands.add_parser(
            name,
            help=summary,
            description=f"{description} and print the final result as JSON.",
            epilog=ANSWERS_HELP + "\n" + NOTICES_HELP + "\n" + EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_call_arguments(command, name)

    listing = commands.add_parser(
        "list",
        help="list a server's tools (with their arguments), prompts, resources or templates",
        description="List what TARGET offers, readably (--json: as the server sent it).",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_list_arguments(listing)

    auth = commands.add_parser(
        "auth",
        help="list or forget the tokens mrtr call stored",
        description="The token store of the client commands (docs/auth.md).",
    )
    add_auth_arguments(auth, _Parser)

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


def _call(prog: str, args: argparse.Namespace) -> int:
    """A call command under ``run_stoppable``: Ctrl-C cancels the call first (a task
    gets its ``tasks/cancel``), then everything (:class:`~.call.CallStop`)."""
    stop = CallStop()

    async def call() -> int:
        with anyio.CancelScope() as scope:
            stop.main = scope
            return await run_call(args, stop=stop)
        return ExitCode.INTERRUPTED  # (cancelled before the call: run_stoppable says so)

    return run_stoppable(prog, call, on_stop=stop.stop)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mrtr`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    prog = f"mrtr {args.command}"
    try:
        if args.command == "serve":
            return run_serve(args)  # Ctrl-C and SIGTERM: see cli/serve.py
        if args.command in CALLS:
            return _call(prog, args)
        if args.command == "list":
            from .listing import run_list

            return run_stoppable(prog, functools.partial(run_list, args))
        if args.command == "auth":
            return run_auth(args)
        return run_state_inspect(args)
    except KeyboardInterrupt:  # outside the run: e.g. while importing what a command needs
        return interrupted(prog)


if __name__ == "__main__":
    sys.exit(main())
