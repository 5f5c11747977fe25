"""The arguments of the client commands: ``call``, ``get-prompt``, ``read`` and ``list``.

The three call commands share every option (answers, bounds, trace, headers,
notices); ``list`` shares the ones that reach a server.  Each command's
positionals are shaped like its method's params (:mod:`~mrtr_transports.cli.call`).
"""

from __future__ import annotations

import argparse
import math

from mrtr_core import LEGACY_VERSIONS, MODERN_VERSIONS
from mrtr_core._meta import LOG_LEVELS
from mrtr_core.engine._engine import DEFAULT_URL_WAIT

from ..client.oauth.loopback import DEFAULT_LOGIN_TIMEOUT
from .exit_codes import ExitCode
from .secrets_input import DEFAULT_CLIENT_SECRET_ENV

__all__ = [
    "ANSWERS_HELP",
    "DEFAULT_TIMEOUT",
    "EXIT_CODES_HELP",
    "add_call_arguments",
    "add_list_arguments",
    "version_text",
]

EXIT_CODES_HELP = "exit codes:\n" + "".join(
    f"  {code.value}  {code.meaning}\n" for code in ExitCode
)

ANSWERS_HELP = """\
answers: an entry named after an input request's key answers that key;
otherwise the entry named after its method answers it: elicitation/create,
elicitation/create#url (URL mode), sampling/createMessage, roots/list.
Keys win over methods.  With no answer and a terminal on stdin, mrtr asks
(roots too: type paths or file:// URIs), in the order the server listed them.
"""

NOTICES_HELP = """\
while the call runs, the server's progress and log messages are printed on
stderr, one line each (--quiet: none are asked for).
"""

TARGET_HELP = "http(s)://URL, ws://URL or stdio:COMMAND ARGS..."
#: How long the client commands wait for the server at each step by default.  60 s:
#: what the peer SDKs give a request (the TypeScript SDK's default request timeout),
#: long for a tool a person waits on, short enough that a server holding a request
#: forever cannot hold the command with it.  The time a person spends at a prompt
#: is not counted: each step is timed from when it is sent.
DEFAULT_TIMEOUT = 60.0


def version_text(version: str) -> str:
    """What ``mrtr --version`` prints: the package's version and the protocol revisions."""
    return (
        f"mrtr {version} (MCP protocol {', '.join(MODERN_VERSIONS)}; "
        f"2025 sessions: {', '.join(LEGACY_VERSIONS)})"
    )


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def deadline_seconds(text: str) -> float | None:
    """``--timeout``: a positive number of seconds, or ``0``/``none`` (``None``: no deadline)."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds, or none") from None
    if value == 0:
        return None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError("must be a positive number of seconds, or 0 or none")
    return value


def _add_reach_arguments(parser: argparse.ArgumentParser) -> None:
    """How to reach the server: headers, era, time budget (every client command)."""
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="an HTTP header for every request, or for the WebSocket handshake "
        "(repeatable; e.g. 'X-Tenant: blue'; a token goes in --token)",
    )
    parser.add_argument(
        "--era",
        choices=("auto", "modern", "legacy"),
        default="auto",
        help="auto: probe server/discover, fall back to a 2025 session (default); "
        "modern: 2026-07-28 at once; legacy: a 2025 initialize at once",
    )
    parser.add_argument(
        "--timeout",
        type=deadline_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SEC",
        help="how long to wait for the server at each step: the handshake (at most 10 s), "
        "each request and each leg of the call; the time you spend at a prompt is not "
        f"counted (default {DEFAULT_TIMEOUT:g}; 0 or none: no deadline)",
    )
    _add_auth_arguments(parser)


def _add_auth_arguments(parser: argparse.ArgumentParser) -> None:
    """How to authenticate (docs/auth.md, "The command line"): OAuth by default on an
    http(s) or ws TARGET that asks for it, or a token given by hand."""
    group = parser.add_argument_group(
        "authorization",
        "an http(s) or ws TARGET that answers 401 gets an OAuth sign-in in your browser;\n"
        "the token is stored (--token-store) and reused by later commands\n"
        "(mrtr auth list, mrtr auth forget; docs/auth.md)",
    )
    group.add_argument(
        "--token",
        metavar="-|@FILE|env:NAME",
        help="send this bearer token (read from stdin, a file or an environment variable; "
        "never given as a value: command lines are visible to every user) and sign in no more",
    )
    group.add_argument(
        "--token-store",
        metavar="PATH",
        help="where tokens and client registrations are kept (owner-only; default "
        "$XDG_CONFIG_HOME/mrtr/tokens.json or ~/.config/mrtr/tokens.json)",
    )
    group.add_argument(
        "--no-browser",
        action="store_true",
        help="print the sign-in URL only; open it yourself",
    )
    group.add_argument(
        "--login-timeout",
        type=deadline_seconds,
        default=DEFAULT_LOGIN_TIMEOUT,
        metavar="SEC",
        help="how long to wait for the browser to come back after the sign-in "
        f"(default {DEFAULT_LOGIN_TIMEOUT:g}; 0 or none: no deadline)",
    )
    group.add_argument(
        "--client-id",
        metavar="ID",
        help="a client id registered with the authorization server (its secret, if any, "
        "in the environment: --client-secret-env)",
    )
    group.add_argument(
        "--client-secret-env",
        metavar="NAME",
        default=DEFAULT_CLIENT_SECRET_ENV,
        help=f"the environment variable holding --client-id's secret "
        f"(default {DEFAULT_CLIENT_SECRET_ENV})",
    )
    group.add_argument(
        "--client-metadata-url",
        metavar="URL",
        help="this client's Client ID Metadata Document (https), used as its client id "
        "where the authorization server takes one",
    )
    group.add_argument(
        "--dpop",
        action="store_true",
        help="ask for tokens bound to a key of this client's (DPoP, RFC 9449) where the "
        "authorization server offers them; the key is stored with the token",
    )


def add_call_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The options and positionals of ``mrtr call``/``get-prompt``/``read``."""
    parser.add_argument("--answers", metavar="FILE", help="a JSON object of answers")
    parser.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="one more answer entry (repeatable; wins over --answers)",
    )
    parser.add_argument(
        "--decline-all", action="store_true", help="decline every elicitation not answered"
    )
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="URI",
        help="a file:// root to answer roots/list with (repeatable)",
    )
    parser.add_argument("--trace", metavar="FILE", help="write every message as NDJSON")
    parser.add_argument(
        "--max-rounds",
        type=positive_int,
        default=10,
        metavar="N",
        help="most input rounds (default 10)",
    )
    parser.add_argument(
        "--max-state-only-legs",
        type=positive_int,
        default=10,
        metavar="N",
        help="most legs in a row that carry only requestState, no answers (default 10)",
    )
    parser.add_argument(
        "--url-wait-timeout",
        type=positive_seconds,
        default=DEFAULT_URL_WAIT,
        metavar="SEC",
        help="after you consent to open a URL, how long to wait for the server to see "
        f"the interaction finish (default {DEFAULT_URL_WAIT:g})",
    )
    _add_reach_arguments(parser)
    parser.add_argument(
        "--verdicts",
        metavar="FILE",
        help="remember each target's era in FILE (JSON) and skip the probe next time",
    )
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="ask for no progress and no log messages (none are printed)",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="the least severe server log message to ask for (default info)",
    )
    parser.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    if command == "call":
        parser.add_argument("tool", metavar="TOOL", help="the tool's name")
        parser.add_argument(
            "arguments", metavar="ARGS_JSON", nargs="?", default="{}", help="a JSON object"
        )
    elif command == "get-prompt":
        parser.add_argument("name", metavar="NAME", help="the prompt's name")
        parser.add_argument(
            "arguments",
            metavar="ARGS_JSON",
            nargs="?",
            default="{}",
            help='a JSON object of strings, e.g. \'{"topic": "trains"}\'',
        )
    else:
        parser.add_argument("uri", metavar="URI", help="the resource's URI")


def add_list_arguments(parser: argparse.ArgumentParser) -> None:
    """The options and positionals of ``mrtr list``."""
    _add_reach_arguments(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the entries as the server sent them (JSON)"
    )
    parser.set_defaults(quiet=True, log_level=None)  # (a list sends no log lines)
    parser.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    parser.add_argument(
        "what",
        metavar="WHAT",
        nargs="?",
        default="tools",
        choices=("tools", "prompts", "resources", "templates"),
        help="tools (default), prompts, resources or templates (resource templates)",
    )
