"""What ``mrtr serve``'s command line says: its options, parsed and checked.

:func:`add_arguments` puts the options on a parser; :meth:`ServeOptions.from_args`
reads them back, checked together (an option that only applies to another
transport, a bound that is not more than 0, a malformed address), and raises
:class:`UsageError` (exit 2, before anything else happens) when they do not fit.
The bound flags are :mod:`~mrtr_transports.cli.serve_bounds`'s table.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import logging
import math
import re
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..server.driver import DEFAULT_DRAIN_TIMEOUT
from ..stores.keys import StateKeys, StateKeysError, load_state_keys
from .serve_bounds import HTTP_BOUNDS, WS_BOUNDS

if TYPE_CHECKING:
    from .serve_auth import AuthOptions

__all__ = [
    "DEFAULT_APP",
    "LOOPS",
    "ServeOptions",
    "UsageError",
    "add_arguments",
    "parse_host_port",
]

DEFAULT_APP = "mrtr_transports.apps.example:build_example_app"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PATH = "/mcp"
#: How long HTTP and WebSocket requests in flight may finish after SIGTERM or Ctrl-C.
DEFAULT_SERVER_DRAIN = 10.0
DEFAULT_HEALTH_PATH = "/healthz"

Transport = Literal["stdio", "http", "ws"]

DEFAULT_LOOP = "trio"
#: ``--loop``: each choice as ``anyio.run``'s backend and its options; uvloop only where
#: it is installed (it is asyncio's loop, made faster).
LOOPS: dict[str, tuple[str, dict[str, Any]]] = {
    "trio": ("trio", {}),
    "asyncio": ("asyncio", {}),
}
if importlib.util.find_spec("uvloop") is not None:  # pragma: no cover (not installed here)
    LOOPS["uvloop"] = ("asyncio", {"use_uvloop": True})


class UsageError(Exception):
    """An option that does not fit (exit 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``mrtr serve`` on ``parser``."""
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
        "--loop",
        choices=sorted(LOOPS),
        default=DEFAULT_LOOP,
        help=f"the event loop the whole command runs on (default {DEFAULT_LOOP})",
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
    parser.add_argument(
        "--task-store",
        metavar="URL",
        help="HTTP: the task store every worker shares, redis://HOST:PORT/DB (needs "
        "--state-keys; default: in this process's memory): a task created on one worker "
        "is polled, answered and cancelled through any. An unreachable store refuses "
        "task requests (-32603). See docs/deploying.md",
    )
    parser.add_argument(
        "--task-lease",
        metavar="SEC",
        type=float,
        help="HTTP, with --task-store: seconds a worker's claim on a task it runs lasts "
        "unrenewed; a killed worker's tasks fail that long after (default 15)",
    )
    from .serve_auth import add_auth_arguments  # (it imports UsageError from here)

    add_auth_arguments(parser)
    parser.add_argument(
        "--task-id-prefix",
        metavar="NAME",
        help="HTTP: task ids start with NAME. (this worker's name), so a load balancer can "
        "route the task methods by the Mcp-Name header to the worker that holds the task "
        "(routing instead of a shared store). See docs/deploying.md",
    )


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The parsed, checked options of one serve command."""

    transport: Transport
    app: str = DEFAULT_APP
    loop: str = DEFAULT_LOOP
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
    task_store: str | None = None
    #: ``--task-lease`` (seconds), or ``None``: the store's default.
    task_lease: float | None = None
    #: What task ids start with (``NAME.``), or ``None``.
    task_id_prefix: str | None = None
    public_url: str | None = None
    callback_path: str | None = None
    #: The HTTP bounds given on the command line, as ``HttpServer`` keywords.
    http_bounds: tuple[tuple[str, float], ...] = ()
    #: The WebSocket bounds given on the command line, as ``WsServer`` keywords.
    ws_bounds: tuple[tuple[str, float], ...] = ()
    #: The ``--auth-*`` flags: tokens required (``None``: no authorization).
    auth: AuthOptions | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServeOptions:
        """The options ``args`` (parsed by :func:`add_arguments`) give; :class:`UsageError`."""
        http_only = [args.path, args.allow_origin, args.allow_host, args.trusted_proxy]
        http_only += [args.state_keys, args.single_use, args.public_url, args.callback_path]
        http_only += [args.health_path, args.task_store, args.task_id_prefix]
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
                "--task-store, --task-id-prefix, --public-url, --callback-path, "
                "--health-path and the HTTP bounds only apply to --http"
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
            check_redis_store("--single-use", args.single_use, state_keys)
        if args.task_store is not None:
            check_redis_store("--task-store", args.task_store, state_keys)
        lease = args.task_lease
        if lease is not None and args.task_store is None:
            raise UsageError("--task-lease only applies with --task-store")
        if lease is not None:
            from ..stores.redis_tasks import DEFAULT_CHECK_INTERVAL, LOOKS_PER_LEASE

            shortest = LOOKS_PER_LEASE * DEFAULT_CHECK_INTERVAL
            if not (lease >= shortest and math.isfinite(lease)):
                raise UsageError(f"--task-lease must be at least {shortest:g} seconds")
        from .serve_auth import AuthOptions  # (it imports UsageError from here)

        auth = AuthOptions.from_args(args, transport)
        task_id_prefix = None
        if args.task_id_prefix is not None:
            task_id_prefix = read_task_id_prefix(args.task_id_prefix)
        return cls(
            transport=transport,
            app=args.app,
            loop=args.loop,
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
            task_store=args.task_store,
            task_lease=lease,
            task_id_prefix=task_id_prefix,
            public_url=args.public_url,
            callback_path=args.callback_path,
            http_bounds=tuple((b.option, value) for b, value in given),
            ws_bounds=tuple((b.option, value) for b, value in ws_given),
            auth=auth,
        )


def _default_drain(transport: Transport) -> float:
    return DEFAULT_DRAIN_TIMEOUT if transport == "stdio" else DEFAULT_SERVER_DRAIN


def read_state_keys(source: str) -> StateKeys:
    """The keys of ``--state-keys FILE`` or ``--state-keys env:NAME``; :class:`UsageError`."""
    try:
        return load_state_keys(source)
    except StateKeysError as exc:
        raise UsageError(str(exc)) from exc


def check_redis_store(flag: str, url: str, state_keys: StateKeys | None) -> None:
    """``--single-use URL`` or ``--task-store URL`` fits; :class:`UsageError`."""
    if state_keys is None:
        # a shared store is only worth anything to workers that open each other's states
        raise UsageError(f"{flag} needs --state-keys (the workers that share it share keys)")
    if urllib.parse.urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise UsageError(f"{flag} {url!r}: expected redis://HOST:PORT/DB")
    try:
        import coredis  # noqa: F401  (the store's client: the `redis` extra)
    except ImportError as exc:
        raise UsageError(
            f"{flag} needs the Redis client: pip install 'mrtr[redis]' ({exc})"
        ) from exc


def read_task_id_prefix(name: str) -> str:
    """``--task-id-prefix NAME``'s prefix, ``NAME.``; :class:`UsageError`."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,63}", name):
        raise UsageError(f"--task-id-prefix {name!r}: 1 to 63 of A-Z a-z 0-9 _ -")
    return f"{name}."


def parse_host_port(text: str, flag: str = "--http") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as ``(host, port)``; :class:`UsageError`."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"{flag} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
    return host.strip("[]"), int(port_text)
