"""The one way a server starts from a command line: ``mrtr serve`` and every ``python -m``.

::

    mrtr serve [--stdio | --http HOST:PORT | --ws HOST:PORT] [OPTIONS]
    python -m mrtr_transports serve [--stdio | --http HOST:PORT | --ws HOST:PORT] [OPTIONS]
    python -m mrtr_transports.server [--stdio | --http HOST:PORT | --ws HOST:PORT] [OPTIONS]

They are one entry (an :class:`Entry` says only how it is called) with one set
of options, and run the same steps, in this order:

1. parse the options (:func:`add_arguments`); a usage error exits 2 before
   anything else happens;
2. send logging to stderr (``--log-level``, default ``WARNING``);
3. stdio only: guard stdout (:func:`~mrtr_transports.server.stdio.guard_stdout`).
   From here on fd 1 and ``sys.stdout`` point at stderr, so whatever the app
   prints, at import time or in a handler, never reaches the protocol stream;
4. load the app (``--app MODULE:ATTR``, default the example app); a module
   that cannot be imported, or an attribute that is not a ``ServerApp``, exits
   2 with a message that says what to fix;
5. serve: stdio until the end of stdin; HTTP until Ctrl-C or SIGTERM, announcing
   ``listening on http://HOST:PORT/PATH`` on stderr once it accepts
   connections (``mrtr serve: listening on ...`` for ``mrtr serve``); WebSocket
   (``--ws``, :mod:`~mrtr_transports.server.ws`) likewise, with ``ws://HOST:PORT/PATH``.
   ``--path``, ``--allow-*``, ``--trusted-proxy`` and ``--max-connections`` apply to
   it as to HTTP; ``--max-message-size``, ``--ping-interval`` and ``--ping-timeout``
   only to it.

Shared state (HTTP only; ``docs/deploying.md``): several ``mrtr serve --http``
workers behind one load balancer serve any leg of any flow when they seal with
the same keys (``--state-keys FILE``, or ``env:NAME``: a JSON document, see
:mod:`mrtr_transports.stores.keys`) and spend redeemed states in one store
(``--single-use redis://HOST:PORT/DB``, which needs ``--state-keys``).  The
entry hands both to ``app.configure_state`` before serving, so the app must be
an ``McpApp`` (anything else is a usage error); the store's connections live as
long as the server.

Stopping (one meaning for every transport): the first SIGTERM or Ctrl-C stops
taking new work (stdio stops reading stdin; HTTP and WebSocket answer newcomers
503 with ``Connection: close``, the health check included) and lets the requests
in flight finish for ``--drain-timeout`` seconds (stdio 1, else 10), then cancels
what is left.  The exit is 0 for SIGTERM (``PROG: terminated`` on stderr) and 130
for Ctrl-C (``PROG: interrupted``), one line, never a traceback; a second signal
cuts the drain short (:mod:`mrtr_transports.cli.interrupts`).

Logging goes to stderr at ``--log-level``; at INFO each request gets an access line
(:mod:`mrtr_transports.server.access`; ``--no-access-log`` keeps them out), and an
app that raises leaves its traceback there at ERROR while the client gets a clean
error.  HTTP-only options (``--allow-origin``, ``--allow-host``, ``--trusted-proxy``,
``--state-keys``, ``--single-use``, ``--public-url``, ``--callback-path``,
``--health-path``) with stdio are usage errors.
The transports' own modules have no ``main``: nothing but this module starts a
server from a command line.
"""

from __future__ import annotations

import argparse
import functools
import gc
import ipaddress
import logging
import math
import signal
import sys
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal

import trio

from ..cli.interrupts import interrupted, run_stoppable
from ..client.errors import ExitCode
from ..stores.keys import StateKeys, StateKeysError, load_state_keys
from .access import ACCESS_LOGGER
from .app import ServerApp
from .bounds import HTTP_BOUNDS, WS_BOUNDS
from .driver import DEFAULT_DRAIN_TIMEOUT, AppSpecError
from .loading import load_app
from .stdio import guard_stdout, serve_stdio

__all__ = [
    "DEFAULT_APP",
    "MRTR_SERVE",
    "SERVER_MODULE",
    "Entry",
    "ServeOptions",
    "add_arguments",
    "main",
    "serve",
]

log = logging.getLogger("mrtr_transports.serve")

DEFAULT_APP = "mrtr_transports.apps.example:app"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PATH = "/mcp"
#: How long HTTP and WebSocket requests in flight may finish after SIGTERM or Ctrl-C.
DEFAULT_SERVER_DRAIN = 10.0
DEFAULT_HEALTH_PATH = "/healthz"

Transport = Literal["stdio", "http", "ws"]


@dataclass(frozen=True, slots=True)
class Entry:
    """How a serve command is called."""

    #: The command, as messages name it.
    prog: str
    #: What the stderr line announcing the HTTP address starts with.
    announce: str = ""
    description: str = "Serve an MCP server app."


MRTR_SERVE = Entry(
    "mrtr serve",
    announce="mrtr serve: ",
    description="Serve an MCP app (default: the example app) over stdio or HTTP.",
)
SERVER_MODULE = Entry(
    "python -m mrtr_transports.server",
    description="Serve an MCP server app over stdio (default) or Streamable HTTP.",
)


class UsageError(Exception):
    """An option that does not fit (exit 2)."""


def add_arguments(parser: argparse.ArgumentParser, entry: Entry) -> None:
    """The serve options on ``parser`` (the same for every entry)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="serve on stdin/stdout (default)")
    where.add_argument(
        "--http", metavar="HOST:PORT", help="serve Streamable HTTP (port 0: any free port)"
    )
    where.add_argument(
        "--ws", metavar="HOST:PORT", help="serve MCP over WebSocket (port 0: any free port)"
    )
    parser.add_argument(
        "--app",
        default=DEFAULT_APP,
        metavar="MODULE:ATTR|FILE.py:ATTR",
        help=f"the ServerApp: a module (the current folder is searched first) or a "
        f"file, and its attribute ({DEFAULT_APP})",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        metavar="LEVEL",
        help="stderr log level (WARNING); INFO adds an access line per request",
    )
    parser.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="no access lines, even at --log-level INFO",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        metavar="SEC",
        help="on SIGTERM or Ctrl-C (and, stdio, at the end of stdin): how long requests "
        f"in flight may finish once no new ones are taken (default: stdio "
        f"{DEFAULT_DRAIN_TIMEOUT:g}, HTTP and WebSocket {DEFAULT_SERVER_DRAIN:g})",
    )
    parser.add_argument(
        "--path", help=f"HTTP, WebSocket: the endpoint path (default {DEFAULT_PATH})"
    )
    parser.add_argument(
        "--health-path",
        metavar="PATH",
        help=f"HTTP: the health check, GET answers 200, or 503 while draining "
        f"(default {DEFAULT_HEALTH_PATH}; 'off': none)",
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="HTTP: the URL clients and browsers reach this server at, behind a proxy "
        "(default: the listening address); URL elicitation's callback is under it",
    )
    parser.add_argument(
        "--callback-path",
        metavar="PATH",
        help="HTTP: URL elicitation's callback under the endpoint (default auth/callback)",
    )
    for flag, metavar, what in (
        ("--allow-origin", "ORIGIN", "an Origin accepted besides localhost (* for any)"),
        ("--allow-host", "HOST", "a Host header accepted besides localhost"),
        ("--trusted-proxy", "CIDR", "a proxy whose X-Forwarded-Host is believed"),
    ):
        help_text = f"HTTP: {what} (repeatable)"
        parser.add_argument(flag, action="append", default=[], metavar=metavar, help=help_text)
    for bound in HTTP_BOUNDS:
        where_applies = "HTTP, WebSocket" if bound.option == "max_connections" else "HTTP"
        parser.add_argument(
            bound.flag,
            dest=bound.option,
            type=bound.kind,
            metavar="N" if bound.kind is int else "SEC",
            help=f"{where_applies}: {bound.what} (default {bound.default})",
        )
    for ws_bound in WS_BOUNDS:
        parser.add_argument(
            ws_bound.flag,
            dest=f"ws_{ws_bound.option}",
            type=ws_bound.kind,
            metavar="N" if ws_bound.kind is int else "SEC",
            help=f"WebSocket: {ws_bound.what} (default {ws_bound.default})",
        )
    parser.add_argument(
        "--state-keys",
        metavar="FILE|env:NAME",
        help="HTTP: the sealing keys every worker of the deployment shares, a JSON document "
        '{"signing_key": ID, "keys": {ID: BASE64}} in FILE or in the environment variable '
        "NAME (default: a random key of this process)",
    )
    parser.add_argument(
        "--single-use",
        metavar="URL",
        help="HTTP: the single-use store every worker shares, redis://HOST:PORT/DB "
        "(needs --state-keys; default: in this process's memory). "
        "An unreachable store refuses guarded legs (-32603). See docs/deploying.md",
    )


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The parsed, checked options of one serve command."""

    transport: Transport
    app: str = DEFAULT_APP
    log_level: str = "WARNING"
    access_log: bool = True
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    health_path: str | None = DEFAULT_HEALTH_PATH
    host: str = DEFAULT_HOST
    port: int = 0
    path: str = DEFAULT_PATH
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    trusted_proxies: tuple[str, ...] = ()
    state_keys: StateKeys | None = None
    single_use: str | None = None
    public_url: str | None = None
    callback_path: str | None = None
    #: The HTTP bounds given on the command line, as ``HttpServer`` keywords.
    http_bounds: tuple[tuple[str, float], ...] = ()
    #: The WebSocket bounds given on the command line, as ``WsServer`` keywords.
    ws_bounds: tuple[tuple[str, float], ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServeOptions:
        """The options ``args`` (parsed by :func:`add_arguments`) give; :class:`UsageError`."""
        http_only = [args.path, args.allow_origin, args.allow_host, args.trusted_proxy]
        http_only += [args.state_keys, args.single_use, args.public_url, args.callback_path]
        http_only += [args.health_path]
        given = [(b, getattr(args, b.option)) for b in HTTP_BOUNDS]
        given = [(b, value) for b, value in given if value is not None]
        http_only += [value for _, value in given]
        for bound, value in given:
            if not value > 0:
                raise UsageError(f"{bound.flag} must be more than 0")
        ws_given = [(b, getattr(args, f"ws_{b.option}")) for b in WS_BOUNDS]
        ws_given = [(b, value) for b, value in ws_given if value is not None]
        for ws_bound, value in ws_given:
            if not value > 0:
                raise UsageError(f"{ws_bound.flag} must be more than 0")
        drain = args.drain_timeout
        host, port = DEFAULT_HOST, 0
        transport: Transport = "stdio" if args.http is None else "http"
        if args.http is not None:
            host, port = parse_host_port(args.http)
        if args.ws is not None:
            transport = "ws"
            host, port = parse_host_port(args.ws, flag="--ws")
            if any(b.option != "max_connections" for b, _ in given):
                raise UsageError("of the HTTP bounds only --max-connections applies to --ws")
        elif ws_given:
            raise UsageError(
                "--max-message-size, --ping-interval and --ping-timeout only apply to --ws"
            )
        if transport == "stdio" and any(http_only):
            raise UsageError(
                "--path, --allow-*, --trusted-proxy, --state-keys, --single-use, "
                "--public-url, --callback-path, --health-path and the HTTP bounds only "
                "apply to --http"
            )
        if args.public_url is not None:
            parts = urllib.parse.urlsplit(args.public_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise UsageError(f"--public-url {args.public_url!r}: an absolute http(s) URL")
        if transport == "ws" and any(
            arg is not None for arg in (args.public_url, args.callback_path, args.health_path)
        ):
            raise UsageError("--public-url, --callback-path and --health-path only apply to --http")
        health_path: str | None = args.health_path or DEFAULT_HEALTH_PATH
        if health_path == "off":
            health_path = None
        elif health_path is not None and not health_path.startswith("/"):
            raise UsageError(f"--health-path {health_path!r}: a path starting with '/', or off")
        if health_path is not None and health_path == (args.path or DEFAULT_PATH):
            raise UsageError(f"--health-path {health_path!r} is the endpoint's own path")
        if drain is not None and not (drain >= 0 and math.isfinite(drain)):
            raise UsageError("--drain-timeout must be a number of seconds, 0 or more")
        if not isinstance(logging.getLevelName(args.log_level.upper()), int):
            raise UsageError(f"--log-level {args.log_level!r}: not a logging level")
        proxies = tuple(args.trusted_proxy)
        for network in proxies:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError as exc:
                raise UsageError(f"--trusted-proxy {network!r}: {exc}") from exc
        state_keys = None if args.state_keys is None else read_state_keys(args.state_keys)
        if args.single_use is not None:
            check_single_use(args.single_use, state_keys)
        return cls(
            transport=transport,
            app=args.app,
            log_level=args.log_level.upper(),
            access_log=args.access_log,
            drain_timeout=_default_drain(transport) if drain is None else drain,
            health_path=health_path,
            host=host,
            port=port,
            path=args.path or DEFAULT_PATH,
            allowed_origins=tuple(args.allow_origin),
            allowed_hosts=tuple(args.allow_host),
            trusted_proxies=proxies,
            state_keys=state_keys,
            single_use=args.single_use,
            public_url=args.public_url,
            callback_path=args.callback_path,
            http_bounds=tuple((b.option, value) for b, value in given),
            ws_bounds=tuple((b.option, value) for b, value in ws_given),
        )


def _default_drain(transport: Transport) -> float:
    return DEFAULT_DRAIN_TIMEOUT if transport == "stdio" else DEFAULT_SERVER_DRAIN


def read_state_keys(source: str) -> StateKeys:
    """The keys of ``--state-keys FILE`` or ``--state-keys env:NAME``; :class:`UsageError`."""
    try:
        return load_state_keys(source)
    except StateKeysError as exc:
        raise UsageError(str(exc)) from exc


def check_single_use(url: str, state_keys: StateKeys | None) -> None:
    """``--single-use URL`` fits; :class:`UsageError`."""
    if state_keys is None:
        # a shared store is only worth anything to workers that open each other's states
        raise UsageError("--single-use needs --state-keys (the workers that share it share keys)")
    if urllib.parse.urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise UsageError(f"--single-use {url!r}: expected redis://HOST:PORT/DB")
    try:
        import coredis  # noqa: F401  (the store's client: the `redis` extra)
    except ImportError as exc:
        raise UsageError(
            f"--single-use needs the Redis client: pip install 'mrtr[redis]' ({exc})"
        ) from exc


def parse_host_port(text: str, flag: str = "--http") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as ``(host, port)``; :class:`UsageError`."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"{flag} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
    return host.strip("[]"), int(port_text)


def main(entry: Entry, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` as ``entry``'s command line and serve; the exit code."""
    parser = argparse.ArgumentParser(prog=entry.prog, description=entry.description)
    add_arguments(parser, entry)
    return serve(entry, parser.parse_args(argv))


def serve(entry: Entry, args: argparse.Namespace) -> int:
    """Serve what ``args`` (parsed by :func:`add_arguments`) say, in the module's order."""
    try:
        options = ServeOptions.from_args(args)
    except UsageError as exc:
        return _fail(entry, str(exc))
    logging.basicConfig(stream=sys.stderr, level=options.log_level)
    if not options.access_log:
        logging.getLogger(ACCESS_LOGGER).setLevel(logging.WARNING)
    guard: AbstractContextManager[Any] = (
        guard_stdout() if options.transport == "stdio" else nullcontext()
    )
    try:
        with guard:  # before the app is imported: its prints go to stderr
            try:
                app = load_app(options.app)
            except AppSpecError as exc:
                return _fail(entry, str(exc))
            except Exception as exc:  # the module's own code failed while importing
                log.debug("importing --app %s failed", options.app, exc_info=True)
                return _fail(entry, f"--app {options.app!r}: importing it failed: {exc!r}")
            if options.state_keys is not None and not _is_mcp_app(app):
                return _fail(
                    entry, f"--state-keys: --app {options.app!r} is not an McpApp (configure_state)"
                )
            # The first SIGTERM or Ctrl-C sets `stop`: the server drains (--drain-timeout)
            # and returns; a second one cancels at once (interrupts.py).
            stop = trio.Event()
            if options.transport == "stdio":
                serving = functools.partial(_serve_stdio, app, options, stop)
            elif options.transport == "ws":
                serving = functools.partial(_serve_ws, entry, app, options, stop)
            else:
                serving = functools.partial(_serve_http, entry, app, options, stop)
            settle_heap()
            stop_on = (signal.SIGINT, signal.SIGTERM)
            return run_stoppable(entry.prog, serving, signals=stop_on, on_stop=stop.set)
    except KeyboardInterrupt:  # before the signal watcher was up: importing the app
        return interrupted(entry.prog)


#: The collector's first-generation threshold while serving (CPython's default is 700).
#: A server allocates a few hundred short-lived objects per message, nearly all freed by
#: reference counting; at 700 the collector ran every few messages, walking the young
#: objects of every connection in flight each time.
SERVING_GC_THRESHOLD = 20_000


def settle_heap() -> None:
    """Before serving: what importing the app left on the heap is moved out of the
    collector's reach (``gc.freeze``), and young collections run less often."""
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(SERVING_GC_THRESHOLD, second, third)


def _fail(entry: Entry, message: str) -> int:
    sys.stderr.write(f"{entry.prog}: error: {message}\n")
    sys.stderr.flush()
    return ExitCode.USAGE


async def _serve_stdio(app: ServerApp, options: ServeOptions, stop: trio.Event) -> int:
    await serve_stdio(app, drain_timeout=options.drain_timeout, stop=stop)
    return ExitCode.RESULT


async def _serve_http(entry: Entry, app: ServerApp, options: ServeOptions, stop: trio.Event) -> int:
    from .http.server import HttpServer

    http_options: dict[str, Any] = {
        "path": options.path,
        "allowed_origins": options.allowed_origins or None,
        "allowed_hosts": options.allowed_hosts or None,
        "trusted_proxies": options.trusted_proxies,
        **dict(options.http_bounds),
    }
    if options.public_url is not None:
        http_options["public_url"] = options.public_url
    if options.callback_path is not None:
        http_options["callback_path"] = options.callback_path
    http_options["health_path"] = options.health_path
    server = HttpServer(app, **http_options)
    async with _shared_state(entry, app, options), trio.open_nursery() as nursery:
        started = await nursery.start(server.serve, options.host, options.port)
        url = _url_of(started, options.host, options.port, options.path)
        sys.stderr.write(f"{entry.announce}listening on {url}\n")
        sys.stderr.flush()
        await stop.wait()
        await server.aclose(grace=options.drain_timeout)
    return ExitCode.RESULT


async def _serve_ws(entry: Entry, app: ServerApp, options: ServeOptions, stop: trio.Event) -> int:
    from .ws import WsServer

    ws_options: dict[str, Any] = {
        "path": options.path,
        "allowed_origins": options.allowed_origins or None,
        "allowed_hosts": options.allowed_hosts or None,
        "trusted_proxies": options.trusted_proxies,
        **dict(options.http_bounds),  # (only --max-connections gets here)
        **dict(options.ws_bounds),
    }
    server = WsServer(app, **ws_options)
    async with _shared_state(entry, app, options), trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, options.host, options.port)
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"{entry.announce}listening on ws://{shown}:{port}{options.path}\n")
        sys.stderr.flush()
        await stop.wait()
        await server.aclose(grace=options.drain_timeout)
    return ExitCode.RESULT


def _is_mcp_app(app: ServerApp) -> bool:
    from ..apps.mcp_app import McpApp

    return isinstance(app, McpApp)


@asynccontextmanager
async def _shared_state(entry: Entry, app: ServerApp, options: ServeOptions) -> AsyncIterator[None]:
    """``--state-keys`` and ``--single-use`` handed to the app, the store open while serving."""
    keys = options.state_keys
    if keys is None:
        yield
        return
    from ..apps.mcp_app import McpApp

    assert isinstance(app, McpApp)  # checked by serve()
    if options.single_use is None:
        app.configure_state(keys.keys, keys.signing_key)
        yield
        return
    from ..stores.redis import RedisSingleUse, SingleUseStoreUnavailable, redacted

    async with RedisSingleUse(options.single_use) as store:
        try:
            await store.check()
        except SingleUseStoreUnavailable as exc:  # serve anyway: redeemed legs fail closed
            where = redacted(options.single_use)
            sys.stderr.write(
                f"{entry.prog}: warning: --single-use {where}: {exc} ({exc.__cause__})\n"
            )
        app.configure_state(keys.keys, keys.signing_key, single_use=store)
        yield


def _url_of(started: Any, host: str, port: int, path: str) -> str:
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
    return f"http://{shown}:{port}{path}"
