"""``mrtr``: serve an app, call a tool through every round it asks for, inspect a sealed state.

The model: ``mrtr call`` is one MCP client making one ``tools/call``.  The
client settles the protocol era, sends the call, and when the server answers
``input_required`` it asks :mod:`~mrtr_transports.cli.answers` for each input
request (the answers book, ``--decline-all``, then the terminal), retries
with the answers and the echoed ``requestState``, and so on until a complete
result, which is printed as JSON on stdout.  Everything else (prompts,
errors) goes to stderr, so stdout is only ever the result.

Commands::

    mrtr serve [--stdio | --http HOST:PORT] [--app MODULE:ATTR] [--allow-origin ORIGIN ...]
               [--allow-host HOST ...] [--trusted-proxy CIDR ...]
    mrtr call [--answers FILE] [--answer KEY=JSON ...] [--decline-all] [--root URI ...]
              [--trace FILE] [--max-rounds N] [--timeout SEC] TARGET TOOL [ARGS_JSON]
    mrtr state inspect --key [ID:]SECRET [--key ...] [--key-id ID] [--method M]
              [--params JSON] [--principal P] [--now SECONDS] TOKEN

``TARGET`` is an ``http://`` or ``https://`` URL (Streamable HTTP) or
``stdio:COMMAND ARGS...``, a server command split with POSIX shell-word rules
(``stdio:"mrtr serve --stdio"``).

Exit codes of ``mrtr call``:

====  =====================================================================
code  meaning
====  =====================================================================
0     a result (printed on stdout)
1     a tool result with ``isError: true`` (printed on stdout)
2     usage: bad arguments, an unreadable or invalid answers file
3     a JSON-RPC or protocol error (the server's error, or a broken reply)
4     timed out (``--timeout``, or a leg the server never answered)
5     the round cap (``--max-rounds``) was exceeded
6     transport failure (could not connect, the server process died, HTTP failure)
7     cancelled, declined to answer, or no answer available for an input request
====  =====================================================================

An elicitation the user declines or cancels is *sent* to the server (decline
and cancel are answers); the server's reply decides the exit code.  Exit 7 is
for the calls that end because the client would not or could not answer: no
answer and no terminal (the client then declares no capability for it, so
the server usually refuses with -32021, naming what it needs), a prompt
aborted with Ctrl-C or end of input, a sampling request refused, an answer
that does not fit what was asked, or Ctrl-C during the call.

``mrtr state inspect`` exits 0 when the token passes every check it could
make, 1 when one fails (the output names it), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import ipaddress
import json
import math
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TextIO

import trio

import mrtr_core as m

EXIT_RESULT = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_PROTOCOL = 3
EXIT_TIMEOUT = 4
EXIT_ROUND_CAP = 5
EXIT_TRANSPORT = 6
EXIT_NO_ANSWER = 7

DEFAULT_APP = "mrtr_transports.apps.example:app"
#: Extra time the whole command gets past ``--timeout`` for the client to report
#: its own, more precise, timeout before the command's backstop fires.
TIMEOUT_GRACE = 0.5
#: How many stderr lines of a dead server process are shown.
STDERR_TAIL_SHOWN = 20

EXIT_CODES_HELP = """\
exit codes:
  0  a result (printed as JSON on stdout)
  1  a tool result with isError: true
  2  usage error (arguments, answers file)
  3  JSON-RPC or protocol error
  4  timed out
  5  round cap (--max-rounds) exceeded
  6  transport failure (connect, server process died, HTTP)
  7  cancelled, declined to answer, or no answer available
"""

ANSWERS_HELP = """\
answers: an entry named after an input request's key answers that key;
otherwise the entry named after its method answers it: elicitation/create,
elicitation/create#url (URL mode), sampling/createMessage, roots/list.
Keys win over methods.  With no answer and a terminal on stdin, mrtr asks.
"""


class UsageError(Exception):
    """A command-line mistake found after parsing (exit 2)."""


# --- Arguments --------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


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
        description="Serve an MCP app (default: the example app) over stdio or HTTP.",
    )
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="serve on stdin/stdout (default)")
    where.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP (port 0: any)")
    serve.add_argument(
        "--app", default=DEFAULT_APP, metavar="MODULE:ATTR", help=f"default: {DEFAULT_APP}"
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an Origin the HTTP server accepts besides localhost (repeatable; * for any)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a Host header the HTTP server accepts besides localhost (repeatable)",
    )
    serve.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="CIDR",
        help="a proxy whose X-Forwarded-Host the HTTP server believes (repeatable)",
    )

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
        "--timeout", type=_positive_seconds, metavar="SEC", help="budget for the whole call"
    )
    call.add_argument("target", metavar="TARGET", help="http(s)://URL or stdio:COMMAND ARGS...")
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
            "keys: --key ID:SECRET, or --key SECRET for the key id the token names "
            "(or --key-id). SECRET is base64 or base64url (padding optional) or hex:HEX; "
            "--key @FILE reads it from FILE. Without --method/--params/--principal those "
            "bindings are not checked; --now defaults to the wall clock (the sealing "
            "server's clock must be the same kind for expiry to mean anything)."
        ),
    )
    inspect.add_argument(
        "--key", action="append", required=True, metavar="[ID:]SECRET", help="a verifying key"
    )
    inspect.add_argument("--key-id", metavar="ID", help="the id of a --key given without one")
    inspect.add_argument("--method", help="the request's method (e.g. tools/call)")
    inspect.add_argument("--params", metavar="JSON", help="the request's params (name, arguments)")
    inspect.add_argument("--principal", help="the principal the server authenticated")
    inspect.add_argument("--now", type=float, metavar="SECONDS", help="the time to judge expiry")
    inspect.add_argument("token", metavar="TOKEN", help="the requestState token")
    return parser


def parse_target(target: str) -> tuple[str, str | list[str]]:
    """``("http", url)`` or ``("stdio", argv)``; :class:`UsageError` for anything else."""
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
    raise UsageError(f"TARGET {target!r}: expected http(s)://... or stdio:COMMAND ARGS...")


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """``text`` as a JSON object; :class:`UsageError` naming ``what`` for anything else."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object")
    return value


# --- mrtr call ----------------------------------------------------------------------------------


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaf_errors(inner)]
    return [exc]


def exit_code_for(exc: BaseException) -> int | None:
    """The exit code a client error means, or ``None`` when it is not one."""
    from ..client import errors

    table: Sequence[tuple[type[BaseException], int]] = (
        (errors.InputUnavailable, EXIT_NO_ANSWER),
        (errors.RoundCapExceeded, EXIT_ROUND_CAP),
        (errors.CallTimeout, EXIT_TIMEOUT),
        (errors.TransportError, EXIT_TRANSPORT),
        (errors.CallError, EXIT_PROTOCOL),
    )
    if isinstance(exc, errors.CallError) and exc.code == m.MISSING_CLIENT_CAPABILITY:
        return EXIT_NO_ANSWER  # the server needs input nothing here can give
    for kind, code in table:
        if isinstance(exc, kind):
            return code
    return None


def describe_error(exc: BaseException) -> str:
    """One or a few lines saying what went wrong, for stderr."""
    from ..client import errors

    if isinstance(exc, errors.CallError) and exc.code == m.MISSING_CLIENT_CAPABILITY:
        needed = exc.data.get("requiredCapabilities") if isinstance(exc.data, Mapping) else None
        return (
            "no answer: the server needs input this call cannot give "
            f"(it requires client capabilities {json.dumps(needed)}; error {exc.code}: "
            f"{exc.message}): add answers with --answers FILE or --answer KEY=JSON, "
            "--root for roots, or run it on a terminal"
        )
    if isinstance(exc, errors.CallError):
        text = f"error {exc.code}: {exc.message}"
        if exc.data is not None:
            text += f"\n  data: {json.dumps(exc.data, ensure_ascii=False, default=str)}"
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
        return fail(EXIT_USAGE, str(exc))
    answerer = CliAnswerer(book, terminal=Terminal.from_stdio(), decline_all=args.decline_all)
    try:
        tracer = NdjsonTracer.open(args.trace, start=start) if args.trace else None
    except OSError as exc:
        return fail(EXIT_USAGE, f"--trace {args.trace}: {exc.strerror or exc}")

    options: dict[str, Any] = {
        "answer": answerer,
        "capabilities": answerer.capabilities(),
        "info": {"name": "mrtr-cli", "version": _version()},
        "tracer": tracer,
    }
    budget = math.inf if args.timeout is None else args.timeout
    result: Mapping[str, Any] | None = None
    try:
        with trio.move_on_after(budget + TIMEOUT_GRACE) as backstop:
            if kind == "stdio":
                from ..client.stdio import open_stdio_client

                assert isinstance(where, list)
                opener = open_stdio_client(where, **options)
            else:
                from ..client.http import open_http_client

                assert isinstance(where, str)
                opener = open_http_client(where, **options)
            async with opener as client:
                remaining = None
                if args.timeout is not None:
                    remaining = max(0.001, start + budget - trio.current_time())
                result = await client.call_tool(
                    args.tool, arguments, timeout=remaining, max_rounds=args.max_rounds
                )
    except BaseException as exc:  # sorted below; the rest re-raised
        for leaf in _leaf_errors(exc):
            code = exit_code_for(leaf)
            if code is not None and code == EXIT_TIMEOUT and args.timeout is not None:
                # The client counts what was left of the budget after connecting: say the whole.
                return fail(code, f"timed out: the call took longer than --timeout {budget:g} s")
            if code is not None:
                return fail(code, describe_error(leaf))
        raise
    finally:
        if tracer is not None:
            tracer.close()
    if backstop.cancelled_caught or result is None:
        return fail(EXIT_TIMEOUT, f"timed out: the call took longer than --timeout {budget:g} s")
    out.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    out.flush()
    return EXIT_TOOL_ERROR if result.get("isError") is True else EXIT_RESULT


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mrtr")
    except Exception:  # not installed as a distribution
        return "0"


# --- mrtr serve ---------------------------------------------------------------------------------


def parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
    return host.strip("[]"), int(port_text)


def run_serve(args: argparse.Namespace) -> int:
    from ..server.driver import load_app

    try:
        app = load_app(args.app)
    except Exception as exc:  # any import failure is the fault of --app
        sys.stderr.write(f"mrtr serve: cannot load --app {args.app}: {exc}\n")
        return EXIT_USAGE
    if args.http is None:
        if args.allow_origin or args.allow_host or args.trusted_proxy:
            sys.stderr.write("mrtr serve: --allow-*/--trusted-proxy only apply to --http\n")
            return EXIT_USAGE
        from ..server.stdio import serve_stdio

        trio.run(serve_stdio, app)
        return EXIT_RESULT
    try:
        host, port = parse_host_port(args.http)
    except UsageError as exc:
        sys.stderr.write(f"mrtr serve: {exc}\n")
        return EXIT_USAGE
    options = {
        "allowed_origins": args.allow_origin or None,
        "allowed_hosts": args.allow_host or None,
        "trusted_proxies": args.trusted_proxy,
    }
    for network in args.trusted_proxy:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError as exc:
            sys.stderr.write(f"mrtr serve: --trusted-proxy {network!r}: {exc}\n")
            return EXIT_USAGE
    trio.run(_serve_http, app, host, port, options)
    return EXIT_RESULT


async def _serve_http(app: Any, host: str, port: int, options: dict[str, Any]) -> None:
    from ..server.http.server import serve_http

    async with trio.open_nursery() as nursery:
        started = await nursery.start(_call_serve_http, serve_http, app, host, port, options)
        sys.stderr.write(f"mrtr serve: listening on {_url_of(started, host, port)}\n")
        sys.stderr.flush()


async def _call_serve_http(
    serve_http: Any,
    app: Any,
    host: str,
    port: int,
    options: dict[str, Any],
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve_http(app, host, port, task_status=task_status, **options)


def _url_of(started: Any, host: str, port: int) -> str:
    """The endpoint URL, from whatever ``serve_http`` reported when it started."""
    if isinstance(started, str):
        return started
    if isinstance(started, int):
        port = started
    elif isinstance(started, tuple) and len(started) >= 2:
        host, port = str(started[0]), int(started[1])
    elif getattr(started, "url", None):
        return str(started.url)
    elif getattr(started, "port", None):
        port = int(started.port)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/mcp"


# --- mrtr state inspect -------------------------------------------------------------------------

#: What each ``InvalidRequestState`` reason means, for people.
REASON_TEXT: Mapping[str, str] = {
    "malformed": "not a requestState token of this format (or not text)",
    "too_large": "longer than the largest token a server reads",
    "unsupported_version": "a token format version this code does not read",
    "unknown_key": "signed by a key id that is not among the given keys",
    "bad_signature": "tampered: the payload, key id or MAC was changed (or the key is wrong)",
    "expired": "expired: older than its time to live",
    "wrong_method": "bound to another method",
    "wrong_params": "bound to another request (another tool, uri or arguments)",
    "wrong_principal": "bound to another principal (another user's state)",
    "replayed": "already used (single-use state)",
    "unknown_continuation": "a continuation this process no longer holds",
}


def _decode_secret(text: str) -> bytes:
    if text.startswith("hex:"):
        try:
            return bytes.fromhex(text[4:])
        except ValueError as exc:
            raise UsageError(f"--key: bad hex ({exc})") from exc
    padded = text + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UsageError("--key: SECRET must be base64, base64url or hex:HEX") from exc


def parse_keys(
    specs: Sequence[str], key_id: str | None, token_key_id: str | None
) -> dict[str, bytes]:
    """The verifying keys ``{key id: secret}`` from ``--key`` values."""
    keys: dict[str, bytes] = {}
    for spec in specs:
        if spec.startswith("@"):
            try:
                with open(spec[1:], encoding="utf-8") as f:
                    spec = f.read().strip()
            except OSError as exc:
                raise UsageError(f"--key {spec}: {exc.strerror or exc}") from exc
        ident, sep, secret_text = spec.partition(":")
        if sep and ident != "hex":
            name: str | None = ident
        else:
            name, secret_text = key_id or token_key_id, spec
        if not name:
            raise UsageError("--key SECRET needs --key-id, or a token that names its key")
        secret = _decode_secret(secret_text)
        if len(secret) < 16:
            raise UsageError(f"--key {name}: a secret is at least 16 bytes, got {len(secret)}")
        keys[name] = secret
    return keys


def _peek(token: str) -> tuple[str | None, Any]:
    """The token's key id and its (unverified) payload, as far as they can be read."""
    parts = token.split(".")
    if len(parts) != 4:
        return None, None
    try:
        body = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        return parts[1], json.loads(body)
    except (binascii.Error, ValueError):
        return parts[1], None


def run_state_inspect(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    token: str = args.token
    token_key_id, payload = _peek(token)
    try:
        keys = parse_keys(args.key, args.key_id, token_key_id)
        params = None if args.params is None else parse_json_object(args.params, "--params")
        sealer = m.StateSealer(keys, next(iter(keys)), max_token_size=max(128, len(token) + 1))
    except (UsageError, m.LocalProtocolError) as exc:
        sys.stderr.write(f"mrtr state inspect: {exc}\n")
        return EXIT_USAGE
    now = time.time() if args.now is None else args.now
    readable = isinstance(payload, dict)
    token_method = payload.get("m") if readable else None
    method = args.method if args.method is not None else str(token_method or "")

    def say(text: str) -> None:
        out.write(text + "\n")

    say(f"key id: {token_key_id if token_key_id is not None else '(unreadable)'}")
    if readable:
        say(
            f"method: {token_method}  issued at: {payload.get('iat')}  "
            f"expires at: {payload.get('exp')}  now: {now}"
        )
    try:
        opened = sealer.open(token, method=method, params=params, principal=args.principal, now=now)
    except m.InvalidRequestState as exc:
        reason = exc.reason
        # The checks run in order (format, key, signature, expiry, method, params,
        # principal): a binding that was not given cannot be the one that failed.
        if reason == "wrong_params" and params is None:
            return _passed(say, payload, "params and principal (give --params to check them)")
        if reason == "wrong_principal" and args.principal is None:
            return _passed(say, payload, "principal: the token is bound to one (give --principal)")
        say(f"verdict: {reason}: {REASON_TEXT.get(reason, reason)}")
        if readable and reason not in ("malformed", "too_large"):
            _show_payload(say, payload, verified=reason not in ("unknown_key", "bad_signature"))
        return 1
    unchecked = [
        name
        for name, given in (
            ("method", args.method),
            ("params", params),
            ("principal", args.principal),
        )
        if given is None
    ]
    say("verdict: valid" + (f" (not checked: {', '.join(unchecked)})" if unchecked else ""))
    say(f"nonce: {opened.nonce}  key: {opened.key_id}")
    say("state: " + json.dumps(opened.value, ensure_ascii=False, sort_keys=True))
    return EXIT_RESULT


def _passed(say: Any, payload: Any, unchecked: str) -> int:
    say("verdict: no failure in the checks made (signature valid, not expired)")
    say(f"not checked: {unchecked}")
    _show_payload(say, payload, verified=True)
    return EXIT_RESULT


def _show_payload(say: Any, payload: Any, *, verified: bool) -> None:
    label = "payload" if verified else "payload (UNVERIFIED: the signature does not hold)"
    say(f"{label}: " + json.dumps(payload, ensure_ascii=False, sort_keys=True))


# --- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mrtr`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return run_serve(args)
        if args.command == "call":
            return trio.run(run_call, args)
        return run_state_inspect(args)
    except KeyboardInterrupt:
        if args.command == "serve":
            return EXIT_RESULT  # Ctrl-C is how a server is stopped
        sys.stderr.write("mrtr: interrupted\n")
        return EXIT_NO_ANSWER if args.command == "call" else 130


if __name__ == "__main__":
    sys.exit(main())
