"""Serve a ``ServerApp`` over Streamable HTTP, protocol revision 2026-07-28 (trio + h11).

The model: one endpoint (``/mcp``), POST only.  Every POST carries one
JSON-RPC message and gets a fresh server ``mrtr_core.Connection``
(``framing="messages"``): 2026-07-28 has no sessions, so nothing is shared
between POSTs and the ids of different clients can never collide.  For each
POST, in order:

1. ``Host`` and ``Origin`` are checked against allow-lists (DNS rebinding):
   by default only ``localhost``, ``127.0.0.1`` and ``[::1]`` on any port
   (``allowed_hosts`` adds names, ``name`` or ``name:port``; ``allowed_origins``
   adds exact origins, ``scheme://host[:port]``; ``"*"`` allows any).  A
   request without ``Origin`` is allowed.  ``X-Forwarded-Host`` is believed
   only from ``trusted_proxies`` (addresses or networks).  A refusal is a 403
   whose message names the setting to change.
2. The path (404), the method (GET, DELETE, ... -> 405 with ``Allow: POST``),
   ``Accept`` (it must take ``application/json`` or ``text/event-stream``,
   else 406), ``Content-Type`` (JSON, else 415) and the body size (413).
3. The headers that mirror the body are checked against it:
   ``MCP-Protocol-Version`` (= ``_meta`` protocolVersion), ``Mcp-Method``,
   ``Mcp-Name`` (tools/call, prompts/get: ``params.name``; resources/read:
   ``params.uri``) and ``Mcp-Param-*`` for the tool arguments annotated
   ``x-mcp-header`` in the tool's ``inputSchema`` (read from the app's own
   ``tools/list``, read again when a call comes more than 5 s later; or
   given as ``param_headers``).  Values in ``=?base64?...?=`` are decoded
   first.  Any mismatch, missing or malformed header is a 400 with JSON-RPC
   error -32020.
4. The connection reads the body.  A notification gets 202 with no body.
   What the connection answers itself (``server/discover``; bad input; a
   missing or malformed ``_meta``, -32602; an unsupported version, -32022) is
   sent as JSON.  A request runs the app.
5. The answer is ``application/json``, unless the handler streams: its first
   progress, log line or notification (one the connection actually sends)
   turns the response into a request-scoped SSE stream (``text/event-stream``,
   ``Cache-Control: no-cache``, ``X-Accel-Buffering: no``, never compressed),
   with a keep-alive comment every ``keepalive_interval`` seconds; the final
   response is the last event and ends the stream.  A client that accepts
   only ``text/event-stream`` always gets a stream; one that accepts only JSON
   never does (its notifications are dropped).

HTTP status of a JSON error answer: -32601 -> 404; -32700, -32600, -32602,
-32020, -32021, -32022 -> 400; -32603 -> 500; any other code -> 200.
``ping`` and ``initialize`` are 2025-era methods this endpoint does not
serve: 404 with -32601.

Cancellation: a client that closes the connection (or the SSE stream) while
its request runs cancels the handler, and nothing more is sent for it.

Bounds: ``max_body_size`` (4 MiB) per POST, ``max_header_size`` (16 KiB, h11's
limit on a request head: 431 past it), ``max_connections`` (256 at once;
past it a connection is answered 503 and closed), ``idle_timeout`` (60 s to
send the next request on a kept-alive connection, and to send a whole request
head and body), ``write_timeout`` (60 s for the peer to take a write).
HTTP/1.1 keep-alive: many POSTs, one after another, on one connection.

Shutdown: ``HttpServer.aclose(grace)`` stops accepting, asks the app to end
its ``subscriptions/listen`` streams (``close_subscriptions()``, when the app
has it, as ``McpApp`` does: each stream gets its final result, not a cut),
closes idle connections, lets running handlers finish for ``grace`` seconds
(their responses are written, then their connections closed), then cancels
the rest.
A response the connection has produced is always written out (bounded by
``write_timeout``).  Cancelling ``serve`` cancels everything at once.

Run it: ``python -m mrtr_transports.server.http.server --app MODULE:ATTR [--port N]``
prints ``listening on http://127.0.0.1:PORT/mcp`` on stderr when ready.

Out of scope: the 2025-era HTTP transport (``Mcp-Session-Id`` sessions, the
GET stream, ``Last-Event-ID`` resumption).  A 2025-era request (no ``_meta``)
gets the connection's -32602 naming the 2026 version to use, and
``initialize`` gets 404 / -32601.  ``Mcp-Session-Id`` and ``Last-Event-ID``
headers are ignored.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import decimal
import http
import ipaddress
import logging
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
import h11
import trio

import mrtr_core as m

from ..app import Outlet, ServerApp
from ..driver import (
    READ_SIZE,
    ConnectionOutlet,
    end_subscriptions,
    response_for,
    run_app,
    send_response,
)

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "HttpServer",
    "ParamHeader",
    "decode_header_value",
    "serve_http",
]

log = logging.getLogger("mrtr_transports.http")

DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024
DEFAULT_MAX_HEADER_SIZE = 16 * 1024
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_KEEPALIVE_INTERVAL = 15.0
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_WRITE_TIMEOUT = 60.0
DEFAULT_SHUTDOWN_GRACE = 10.0
#: Host names allowed by default (any port): the loopback names.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
#: Pages of the app's tools/list read for x-mcp-header annotations.
MAX_TOOL_PAGES = 100
#: How long the annotations read from tools/list are trusted (seconds).
TOOLS_CACHE_TTL = 5.0

BASE64_PREFIX = "=?base64?"
BASE64_SUFFIX = "?="
STATUS_FOR_CODE = {
    m.METHOD_NOT_FOUND: 404,
    m.PARSE_ERROR: 400,
    m.INVALID_REQUEST: 400,
    m.INVALID_PARAMS: 400,
    m.HEADER_MISMATCH: 400,
    m.MISSING_CLIENT_CAPABILITY: 400,
    m.UNSUPPORTED_PROTOCOL_VERSION: 400,
    m.INTERNAL_ERROR: 500,
}
#: 2025-era methods with no place on a 2026-07-28 endpoint (the connection refuses them
#: when they carry 2026 ``_meta``; without it, a bare ``ping`` is refused here).
REMOVED_METHODS = frozenset({"ping", "initialize"})
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


# --- Header values -------------------------------------------------------------------


def decode_header_value(raw: str) -> str | None:
    """A mirrored header value as text: ``=?base64?...?=`` decoded, else as it is.

    ``None`` when it is malformed: bad base64 (alphabet or padding), not
    UTF-8, or a plain value with characters outside visible ASCII, space and tab.
    """
    if raw.startswith(BASE64_PREFIX) and raw.endswith(BASE64_SUFFIX) and len(raw) >= 11:
        try:
            return base64.b64decode(
                raw[len(BASE64_PREFIX) : -len(BASE64_SUFFIX)], validate=True
            ).decode()
        except (binascii.Error, ValueError):
            return None
    if all(ch == "\t" or " " <= ch <= "~" for ch in raw):
        return raw
    return None


@attrs.frozen
class ParamHeader:
    """One ``x-mcp-header`` annotation: ``Mcp-Param-{name}`` mirrors the argument at ``path``."""

    name: str
    path: tuple[str, ...]


def param_headers_of(input_schema: Any) -> list[ParamHeader]:
    """The annotations of one tool, reached through ``properties`` chains only."""
    found: list[ParamHeader] = []

    def walk(schema: Any, path: tuple[str, ...]) -> None:
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(properties, Mapping):
            return
        for key, prop in properties.items():
            if not isinstance(prop, Mapping):
                continue
            name = prop.get("x-mcp-header")
            if isinstance(name, str) and name:
                found.append(ParamHeader(name=name, path=(*path, str(key))))
            walk(prop, (*path, str(key)))

    walk(input_schema, ())
    return found


def _value_at(arguments: Any, path: Sequence[str]) -> Any:
    value = arguments
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _header_matches(decoded: str, value: Any) -> bool:
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if isinstance(value, (int, float)):  # numerically: "42.0" is 42
        try:
            number = decimal.Decimal(decoded.strip())
        except decimal.InvalidOperation:
            return False
        return number.is_finite() and number == decimal.Decimal(value)
    return isinstance(value, str) and decoded == value


class Headers:
    """A request's header fields by lower-case name (h11 lower-cases them)."""

    def __init__(self, fields: Iterable[tuple[bytes, bytes]]) -> None:
        self._fields: dict[str, list[str]] = {}
        for name, value in fields:
            self._fields.setdefault(name.decode("latin-1"), []).append(value.decode("latin-1"))

    def get_all(self, name: str) -> list[str]:
        return self._fields.get(name, [])

    def get(self, name: str) -> str | None:
        values = self._fields.get(name)
        return values[0] if values else None


class HeaderMismatch(Exception):
    """A mirrored header does not match the body (-32020)."""


def _single(headers: Headers, name: str, shown: str) -> str | None:
    values = headers.get_all(name)
    if len(values) > 1:
        raise HeaderMismatch(f"Header mismatch: more than one {shown} header")
    return values[0] if values else None


def check_standard_headers(headers: Headers, message: Mapping[str, Any]) -> None:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` against the body."""
    method = message["method"]
    is_request = "id" in message
    params = message.get("params")
    params = params if isinstance(params, Mapping) else {}
    header = _single(headers, "mcp-method", "Mcp-Method")
    _check_mirror(header, "Mcp-Method", method, is_request)
    meta = params.get("_meta")
    version = meta.get(m.META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
    header = _single(headers, "mcp-protocol-version", "MCP-Protocol-Version")
    # No version in the body: the connection answers -32602 for the missing _meta.
    if isinstance(version, str):
        _check_mirror(header, "MCP-Protocol-Version", version, is_request)
    field = NAME_FIELDS.get(method)
    if field is None:
        return
    value = params.get(field)
    header = _single(headers, "mcp-name", "Mcp-Name")
    if header is None:
        if isinstance(value, str) and is_request:
            raise HeaderMismatch("Header mismatch: the Mcp-Name header is missing")
        return
    decoded = decode_header_value(header)
    if decoded is None:
        raise HeaderMismatch(f"Header mismatch: malformed Mcp-Name header value {header!r}")
    if decoded != value:
        raise HeaderMismatch(
            f"Header mismatch: Mcp-Name header value {decoded!r} "
            f"does not match body value {value!r}"
        )


def _check_mirror(header: str | None, shown: str, body_value: str, is_request: bool) -> None:
    """A header that mirrors ``body_value``: required on a request, equal when present."""
    if header is None:
        if is_request:
            raise HeaderMismatch(f"Header mismatch: the {shown} header is missing")
    elif header != body_value:
        raise HeaderMismatch(
            f"Header mismatch: {shown} header value {header!r} "
            f"does not match body value {body_value!r}"
        )


def check_param_headers(
    headers: Headers, arguments: Any, annotations: Sequence[ParamHeader]
) -> None:
    """``Mcp-Param-*`` headers of one tools/call against its arguments."""
    for annotation in annotations:
        shown = f"Mcp-Param-{annotation.name}"
        value = _value_at(arguments, annotation.path)
        header = _single(headers, f"mcp-param-{annotation.name.lower()}", shown)
        where = ".".join(annotation.path)
        if value is None:
            if header is not None:
                raise HeaderMismatch(
                    f"Header mismatch: {shown} header given, but the arguments have no {where!r}"
                )
            continue
        if header is None:
            raise HeaderMismatch(
                f"Header mismatch: the {shown} header is missing for argument {where!r}"
            )
        decoded = decode_header_value(header)
        if decoded is None:
            raise HeaderMismatch(f"Header mismatch: malformed {shown} header value {header!r}")
        if not _header_matches(decoded, value):
            raise HeaderMismatch(
                f"Header mismatch: {shown} header value {decoded!r} "
                f"does not match argument {where!r} = {value!r}"
            )


# --- Accept, Host, Origin ------------------------------------------------------------


def _accepted(accept_values: Sequence[str]) -> tuple[bool, bool]:
    """(accepts application/json, accepts text/event-stream); no Accept accepts both."""
    if not accept_values:
        return True, True
    json_ok = sse_ok = False
    for value in accept_values:
        for item in value.split(","):
            media, *parameters = (part.strip() for part in item.split(";"))
            quality = 1.0
            for parameter in parameters:
                key, _, raw = parameter.partition("=")
                if key.strip().lower() == "q":
                    try:
                        quality = float(raw)
                    except ValueError:
                        quality = 0.0
            if quality <= 0:
                continue
            media = media.lower()
            json_ok = json_ok or media in ("application/json", "application/*", "*/*")
            sse_ok = sse_ok or media in ("text/event-stream", "text/*", "*/*")
    return json_ok, sse_ok


def _split_host(host: str) -> tuple[str, str | None]:
    """``"name:port"`` or ``"[v6]:port"`` -> (lower-case name, port or None)."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return host, None
        name, rest = host[: end + 1], host[end + 1 :]
        return name, rest[1:] if rest.startswith(":") else None
    name, sep, port = host.partition(":")
    return name, port if sep else None


def _origin_of(value: str) -> tuple[str, str] | None:
    """An Origin value as (``scheme://host[:port]``, host name in URL form), or None."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    name = parts.hostname.lower()
    shown = f"[{name}]" if ":" in name else name
    origin = f"{parts.scheme.lower()}://{shown}" + (f":{port}" if port is not None else "")
    return origin, shown


class AccessPolicy:
    """Who may talk to the endpoint: Host and Origin allow-lists, trusted proxies."""

    def __init__(
        self,
        allowed_hosts: Iterable[str] | None,
        allowed_origins: Iterable[str] | None,
        trusted_proxies: Iterable[str],
    ) -> None:
        # Entries are added to the loopback defaults; "*" allows any.
        self.hosts = {h.strip().lower() for h in (*LOCAL_HOSTS, *(allowed_hosts or ()))}
        origins = set()
        for entry in allowed_origins or ():
            parsed = _origin_of(entry)
            origins.add("*" if entry.strip() == "*" else parsed[0] if parsed else entry.lower())
        self.origins = origins
        self.proxies = [ipaddress.ip_network(p, strict=False) for p in trusted_proxies]

    def refusal(self, headers: Headers, peer: str | None) -> str | None:
        """Why this request is refused (the 403 message), or None."""
        host = headers.get("host")
        forwarded = headers.get("x-forwarded-host")
        if forwarded is not None and self._trusted(peer):
            host = forwarded.split(",")[0]
        if host is not None and not self._host_allowed(host):
            return (
                f"Host {host.strip()!r} is not allowed: add it to allowed_hosts "
                "(mrtr serve --allow-host)"
            )
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin):
            return (
                f"Origin {origin.strip()!r} is not allowed: add it to allowed_origins "
                "(mrtr serve --allow-origin)"
            )
        return None

    def _trusted(self, peer: str | None) -> bool:
        if peer is None or not self.proxies:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.proxies)

    def _host_allowed(self, host: str) -> bool:
        if "*" in self.hosts:
            return True
        name, port = _split_host(host)
        return name in self.hosts or (port is not None and f"{name}:{port}" in self.hosts)

    def _origin_allowed(self, value: str) -> bool:
        if "*" in self.origins:
            return True
        parsed = _origin_of(value)
        if parsed is None:
            return False  # "null" (a sandboxed page, a file://) and garbage
        origin, name = parsed
        if origin in self.origins:
            return True
        return name in LOCAL_HOSTS and origin.split("://", 1)[0] in ("http", "https")


# --- The server ----------------------------------------------------------------------


async def serve_http(
    app: ServerApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    **options: Any,
) -> None:
    """Serve ``app`` at ``http://host:port/path`` until cancelled.

    ``task_status.started()`` reports the bound ``(host, port)`` (useful with
    ``port=0``).  ``options``: the ``HttpServer`` settings (``path``,
    ``allowed_hosts``, ``max_body_size``, ``idle_timeout``, ...) and
    ``mrtr_core.Connection`` options.
    """
    server = HttpServer(app, **options)
    await server.serve(host, port, task_status=task_status)


class HttpServer:
    """The Streamable HTTP endpoint for one app; ``serve`` it, ``aclose`` it.

    ::

        server = HttpServer(app)
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        ...
        await server.aclose(grace=5.0)  # serve() returns
    """

    def __init__(
        self,
        app: ServerApp,
        *,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
        trusted_proxies: Iterable[str] = (),
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        param_headers: Mapping[str, Sequence[ParamHeader]] | None = None,
        **connection_options: Any,
    ) -> None:
        for name, value in (
            ("max_body_size", max_body_size),
            ("max_header_size", max_header_size),
            ("max_connections", max_connections),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer")
        self.app = app
        self.path = path
        self.policy = AccessPolicy(allowed_hosts, allowed_origins, trusted_proxies)
        self.max_body_size = max_body_size
        self.max_header_size = max_header_size
        self.keepalive_interval = keepalive_interval
        self.idle_timeout = idle_timeout
        self.write_timeout = write_timeout
        versions = connection_options.pop("versions", m.MODERN_VERSIONS)
        self.connection_options: dict[str, Any] = {
            "info": app.info,
            "capabilities": app.capabilities,
            "instructions": app.instructions,
            **connection_options,
            # No 2025-era sessions here: initialize is not served.
            "versions": tuple(v for v in versions if v in m.MODERN_VERSIONS),
        }
        m.Connection(m.SERVER, framing="messages", **self.connection_options)  # options fail now
        self.address: tuple[str, int] | None = None
        self.closing = False
        self._limiter = trio.CapacityLimiter(max_connections)
        self._connections: set[_HttpConnection] = set()
        self._all_closed = trio.Event()
        self._all_closed.set()
        self._stopped = trio.Event()
        self._accept_scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._fixed_param_headers = param_headers
        self._tool_headers: dict[str, list[ParamHeader]] | None = None
        self._tools_read_at = -math.inf
        self._tools_lock = trio.Lock()

    # --- Life cycle ---

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` and serve until ``aclose`` or cancellation."""
        if self._nursery is not None or self._stopped.is_set():
            raise RuntimeError("an HttpServer serves once")
        listeners = await trio.open_tcp_listeners(port, host=host)
        if port == 0:  # each address family would get its own free port: keep one
            for extra in listeners[1:]:
                await extra.aclose()
            listeners = listeners[:1]
        bound = listeners[0].socket.getsockname()
        self.address = (str(bound[0]), int(bound[1]))
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._accept, listeners, nursery)
                task_status.started(self.address)
        finally:
            self._stopped.set()

    async def _accept(self, listeners: list[trio.SocketListener], nursery: trio.Nursery) -> None:
        with self._accept_scope:
            await trio.serve_listeners(self._serve_connection, listeners, handler_nursery=nursery)

    async def aclose(self, grace: float = DEFAULT_SHUTDOWN_GRACE) -> None:
        """Stop accepting; end the app's listen streams (``close_subscriptions``);
        give running requests ``grace`` seconds; cancel the rest."""
        if not self.closing:
            self.closing = True
            self._accept_scope.cancel()
            end_subscriptions(self.app)  # open listen streams get their final result
            for connection in list(self._connections):
                connection.shutdown()  # idle ones close now
            with trio.move_on_after(grace):
                await self._all_closed.wait()
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()
        if self._nursery is not None:
            await self._stopped.wait()

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        try:
            self._limiter.acquire_nowait()
        except trio.WouldBlock:
            await _refuse_busy(stream)
            return
        connection = _HttpConnection(self, stream)
        self._connections.add(connection)
        if self._all_closed.is_set():
            self._all_closed = trio.Event()
        try:
            await connection.serve()
        except Exception:  # a bug here must not take the other connections down
            log.exception("connection from %s failed", connection.peer)
        finally:
            self._connections.discard(connection)
            self._limiter.release()
            if not self._connections:
                self._all_closed.set()
            await trio.aclose_forcefully(stream)

    # --- x-mcp-header annotations ---

    async def param_headers(self, tool: str) -> Sequence[ParamHeader]:
        """The ``x-mcp-header`` annotations of ``tool`` (from the app's tools/list)."""
        if self._fixed_param_headers is not None:
            return self._fixed_param_headers.get(tool, ())
        known = self._tool_headers
        if known is None or trio.current_time() - self._tools_read_at > TOOLS_CACHE_TTL:
            async with self._tools_lock:
                if self._tool_headers is known:  # nobody refreshed while we waited
                    self._tool_headers = await self._read_tool_headers()
                    self._tools_read_at = trio.current_time()
            known = self._tool_headers
        assert known is not None
        return known.get(tool, ())

    async def _read_tool_headers(self) -> dict[str, list[ParamHeader]]:
        found: dict[str, list[ParamHeader]] = {}
        cursor: Any = None
        for page in range(MAX_TOOL_PAGES):
            params: dict[str, Any] = {
                "_meta": {
                    m.META_PROTOCOL_VERSION: m.MODERN_VERSIONS[0],
                    m.META_CLIENT_CAPABILITIES: {},
                }
            }
            if cursor is not None:
                params["cursor"] = cursor
            request = m.Request(id=f"mrtr-tools-{page}", method="tools/list", params=params)
            info = m.RequestInfo(
                id=request.id,
                method="tools/list",
                era="modern",
                protocol_version=m.MODERN_VERSIONS[0],
                capabilities={},
                client_info=None,
                log_level=None,
                progress_token=None,
                retry=False,
            )
            outcome = await run_app(self.app, request, info, _SILENT)
            if isinstance(outcome, m.MrtrError):
                if outcome.code != m.METHOD_NOT_FOUND:
                    log.warning("tools/list for x-mcp-header annotations failed: %s", outcome)
                return found
            for tool in outcome.get("tools") or ():
                if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
                    annotations = param_headers_of(tool.get("inputSchema"))
                    if annotations:
                        found[tool["name"]] = annotations
            cursor = outcome.get("nextCursor")
            if cursor is None:
                break
        return found


def _reason(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


class _SilentOutlet(Outlet):
    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        return None

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        return None


_SILENT = _SilentOutlet()


async def _refuse_busy(stream: trio.SocketStream) -> None:
    """Past ``max_connections``: say so and close, without reading the request."""
    with trio.move_on_after(1.0):
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.send_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n"
                b"content-length: 21\r\nconnection: close\r\n\r\ntoo many connections\n"
            )
    await trio.aclose_forcefully(stream)


class _PeerGone(Exception):
    """The client closed the connection."""


class _HttpConnection:
    """One TCP connection: HTTP/1.1 requests one after another (keep-alive)."""

    def __init__(self, server: HttpServer, stream: trio.SocketStream) -> None:
        self.server = server
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=server.max_header_size)
        self.write_lock = trio.Lock()
        self.idle_scope: trio.CancelScope | None = None
        try:
            self.peer: str | None = str(stream.socket.getpeername()[0])
        except OSError:
            self.peer = None

    def shutdown(self) -> None:
        """The server is closing: an idle connection closes now, a busy one after its answer."""
        if self.idle_scope is not None:
            self.idle_scope.cancel()

    async def serve(self) -> None:
        while not self.server.closing:
            try:
                request = await self._next_request()
            except h11.RemoteProtocolError as exc:
                await self._send_simple(exc.error_status_hint, f"bad request: {exc}")
                return
            if request is None:
                return
            try:
                await self._handle(request)
            except h11.RemoteProtocolError as exc:  # e.g. broken chunked encoding
                await self._send_simple(exc.error_status_hint, f"bad request: {exc}")
                return
            except _PeerGone:
                return
            if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                return  # the body was not read, or the response ended the connection
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                return

    # --- Reading ---

    async def _receive(self) -> None:
        try:
            data = await self.stream.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        self.h11.receive_data(data)

    async def _next_request(self) -> h11.Request | None:
        """The next request head; ``None`` when the client is gone or idle too long."""
        self.idle_scope = trio.CancelScope(deadline=trio.current_time() + self.server.idle_timeout)
        try:
            with self.idle_scope:
                while True:
                    event = self.h11.next_event()
                    if event is h11.NEED_DATA:
                        if self.h11.their_state is h11.IDLE and self.server.closing:
                            return None
                        await self._receive()
                        continue
                    if isinstance(event, h11.Request):
                        return event
                    return None  # ConnectionClosed, or PAUSED after a close
        finally:
            self.idle_scope = None
        return None

    async def _read_body(self, limit: int) -> bytes | None:
        """The whole body, or ``None`` past ``limit`` bytes."""
        if self.h11.their_state is h11.DONE:
            return b""  # no body at all (its end was read with the head)
        if self.h11.they_are_waiting_for_100_continue:
            await self._write(h11.InformationalResponse(status_code=100, headers=[]))
        chunks: list[bytes] = []
        size = 0
        with trio.move_on_after(self.server.idle_timeout):
            while True:
                event = self.h11.next_event()
                if event is h11.NEED_DATA:
                    await self._receive()
                elif isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > limit:
                        return None
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    return b"".join(chunks)
                else:  # ConnectionClosed mid-body
                    raise _PeerGone
        await self._send_simple(408, "the request body took too long")
        raise _PeerGone

    # --- Writing ---

    async def _write(self, *events: Any, final: bool = False) -> None:
        """Send h11 events, waiting at most ``write_timeout`` for the peer to take them.

        A ``final`` write (a whole response the connection has produced) is
        shielded from cancellation: what was produced is owed to the client.
        """
        with trio.CancelScope(shield=final) as scope:
            scope.deadline = trio.current_time() + self.server.write_timeout
            async with self.write_lock:
                data = b"".join(self.h11.send(event) or b"" for event in events)
                try:
                    await self.stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    raise _PeerGone from exc
        if scope.cancelled_caught:
            raise _PeerGone  # the peer stopped reading

    def _response_headers(self, content_type: bytes | None, length: int | None) -> list[Any]:
        headers: list[Any] = []
        if content_type is not None:
            headers.append((b"content-type", content_type))
        if length is not None:
            headers.append((b"content-length", str(length).encode()))
        if self.server.closing or self.h11.their_state is not h11.DONE:
            headers.append((b"connection", b"close"))  # the request body is left unread
        return headers

    async def _send_body(
        self, status: int, body: bytes, content_type: bytes, extra: Sequence[Any] = ()
    ) -> None:
        headers = [*self._response_headers(content_type, len(body)), *extra]
        await self._write(
            h11.Response(status_code=status, headers=headers, reason=_reason(status)),
            h11.Data(data=body),
            h11.EndOfMessage(),
            final=True,
        )

    async def _send_error(
        self, status: int, message: str, code: int = m.INVALID_REQUEST, extra: Sequence[Any] = ()
    ) -> None:
        """An HTTP error whose body is a JSON-RPC error response without id."""
        error = m.ErrorResponse(id=None, error=m.ErrorObject(code=code, message=message))
        await self._send_body(status, m.encode_message(error), b"application/json", extra)

    async def _send_simple(self, status: int, message: str) -> None:
        """A plain-text error after an HTTP-level failure, when one can still be sent."""
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        with contextlib.suppress(_PeerGone, h11.LocalProtocolError):
            await self._send_body(status, message.encode() + b"\n", b"text/plain")

    # --- One HTTP request ---

    async def _handle(self, request: h11.Request) -> None:
        server = self.server
        # h11 bounds a head that arrives in pieces; one that arrives whole is measured here.
        head_size = len(request.target) + sum(len(k) + len(v) + 4 for k, v in request.headers)
        if head_size > server.max_header_size:
            await self._send_simple(431, "request header fields too large")
            return
        headers = Headers(request.headers)
        if (
            headers.get("content-length") in (None, "0")
            and headers.get("transfer-encoding") is None
        ):
            self.h11.next_event()  # the EndOfMessage of an empty body: keep-alive after a refusal
        refusal = server.policy.refusal(headers, self.peer)
        if refusal is not None:
            log.warning("refused: %s", refusal)
            await self._send_error(403, refusal)
            return
        path = request.target.split(b"?", 1)[0].decode("latin-1")
        if path != server.path:
            await self._send_error(404, f"no MCP endpoint at {path!r}: use {server.path!r}")
            return
        if request.method != b"POST":
            await self._send_error(
                405,
                f"{request.method.decode('latin-1')} is not allowed: the 2026-07-28 endpoint "
                "takes POST only (no sessions, no GET stream)",
                extra=[(b"allow", b"POST")],
            )
            return
        json_ok, sse_ok = _accepted(headers.get_all("accept"))
        if not (json_ok or sse_ok):
            await self._send_error(406, "Accept must include application/json or text/event-stream")
            return
        content_type = headers.get("content-type")
        if content_type is not None and content_type.split(";")[0].strip().lower() not in (
            "application/json",
        ):
            await self._send_error(415, "Content-Type must be application/json")
            return
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > server.max_body_size:
            await self._send_error(413, f"body larger than {server.max_body_size} bytes")
            return
        body = await self._read_body(server.max_body_size)
        if body is None:
            await self._send_error(413, f"body larger than {server.max_body_size} bytes")
            return
        await self._handle_message(headers, body, json_ok, sse_ok)

    async def _handle_message(
        self, headers: Headers, body: bytes, json_ok: bool, sse_ok: bool
    ) -> None:
        server = self.server
        if not body.strip():
            await self._send_error(400, "empty body: expected one JSON-RPC message", m.PARSE_ERROR)
            return
        conn = m.Connection(m.SERVER, framing="messages", **server.connection_options)
        try:
            message = m.default_codec.loads(body)  # headers are checked before the body is judged
        except m.MrtrError:
            message = None
        if isinstance(message, Mapping) and isinstance(message.get("method"), str):
            rid = message.get("id")
            rid = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
            try:
                check_standard_headers(headers, message)
                params = message.get("params")
                if message["method"] == "tools/call" and isinstance(params, Mapping):
                    name = params.get("name")
                    if isinstance(name, str):
                        annotations = await server.param_headers(name)
                        check_param_headers(headers, params.get("arguments"), annotations)
            except HeaderMismatch as exc:
                error = m.ErrorObject(code=m.HEADER_MISMATCH, message=str(exc))
                await self._send_json(m.encode_message(m.ErrorResponse(id=rid, error=error)), 400)
                return
        conn.receive_data(body)
        event = conn.next_event(trio.current_time())
        if isinstance(event, m.Request):
            await self._answer(conn, event, json_ok, sse_ok)
        elif isinstance(event, m.AutoReply):
            reply = event.reply
            if event.request.method in REMOVED_METHODS:
                removed = m.MrtrError(
                    f"{event.request.method} is not a 2026-07-28 method", code=m.METHOD_NOT_FOUND
                )
                reply = m.error_response(event.request.id, removed)
            await self._send_final(reply, conn.send(reply), json_ok, sse_ok)
        elif isinstance(event, m.InvalidMessage):
            if event.reply is not None:
                await self._send_final(event.reply, conn.send(event.reply), json_ok, sse_ok)
            else:  # a notification or a response we cannot take: no JSON-RPC answer is due
                await self._send_error(400, event.error.message, event.error.code)
        else:  # a notification (NEED_DATA: one the connection took, e.g. a late cancel)
            await self._write(
                h11.Response(
                    status_code=202, headers=self._response_headers(None, 0), reason=b"Accepted"
                ),
                h11.EndOfMessage(),
            )

    async def _send_json(self, data: bytes, status: int) -> None:
        await self._send_body(status, data, b"application/json")

    async def _send_final(
        self,
        response: m.ResultResponse | m.ErrorResponse,
        data: bytes,
        json_ok: bool,
        sse_ok: bool,
        exchange: _Exchange | None = None,
    ) -> None:
        if exchange is not None and exchange.streaming:
            await exchange.finish(data)
        elif json_ok:
            status = 200
            if isinstance(response, m.ErrorResponse):
                status = STATUS_FOR_CODE.get(response.error.code, 200)
            await self._send_json(data, status)
        else:  # the client takes only a stream
            exchange = exchange or _Exchange(self, sse_ok=True)
            await exchange.start()
            await exchange.finish(data)

    async def _answer(
        self, conn: m.Connection, request: m.Request, json_ok: bool, sse_ok: bool
    ) -> None:
        """Run the app on ``request``; cancel it if the client goes away meanwhile."""
        info = conn.request_info(request.id)
        handler_scope = trio.CancelScope()
        exchange = _Exchange(self, sse_ok=sse_ok)
        outlet = ConnectionOutlet(conn, request.id, exchange.notify)
        outcome: m.MrtrError | Mapping[str, Any] = m.MrtrError("cancelled")
        async with trio.open_nursery() as nursery:
            exchange.nursery = nursery
            exchange.on_gone = handler_scope.cancel
            nursery.start_soon(self._watch_peer, exchange)
            with handler_scope:
                outcome = await run_app(self.server.app, request, info, outlet)
            nursery.cancel_scope.cancel()  # the watcher and the keep-alives
        exchange.nursery = None  # no keep-alives for the final answer alone
        if exchange.gone:
            conn.response_stream_closed(request.id)
            send_response(conn, response_for(request.id, outcome))  # b"": releases the id
            raise _PeerGone
        response, data = send_response(conn, response_for(request.id, outcome))
        await self._send_final(response, data, json_ok, sse_ok, exchange)

    async def _watch_peer(self, exchange: _Exchange) -> None:
        """While a handler runs: end of input from the client is its cancellation."""
        received = 0
        limit = self.server.max_header_size + self.server.max_body_size
        while received <= limit:
            try:
                data = await self.stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                exchange.peer_gone()
                return
            # A pipelined next request: kept for the next cycle (up to one request's worth).
            self.h11.receive_data(data)
            received += len(data)


class _Exchange:
    """The response to one request: JSON, or an SSE stream once the handler streams."""

    def __init__(self, connection: _HttpConnection, *, sse_ok: bool) -> None:
        self.connection = connection
        self.sse_ok = sse_ok
        self.streaming = False
        self.gone = False
        self.nursery: trio.Nursery | None = None
        self.on_gone: Any = None

    def peer_gone(self) -> None:
        if not self.gone:
            self.gone = True
            if self.on_gone is not None:
                self.on_gone()

    async def notify(self, data: bytes) -> None:
        """The Outlet's write: the first notification opens the stream."""
        if not data or self.gone or not self.sse_ok:
            return  # nothing due, nobody listening, or a client that takes JSON only
        try:
            if not self.streaming:
                await self.start()
            await self.connection._write(h11.Data(data=m.encode_sse(data.decode())))
        except _PeerGone:
            self.peer_gone()

    async def start(self) -> None:
        self.streaming = True
        headers = [*SSE_HEADERS, *self.connection._response_headers(None, None)]
        await self.connection._write(h11.Response(status_code=200, headers=headers, reason=b"OK"))
        if self.nursery is not None and self.connection.server.keepalive_interval > 0:
            self.nursery.start_soon(self._keepalive)

    async def _keepalive(self) -> None:
        interval = self.connection.server.keepalive_interval
        while True:
            await trio.sleep(interval)
            try:
                await self.connection._write(h11.Data(data=m.encode_sse_comment()))
            except _PeerGone:
                self.peer_gone()
                return

    async def finish(self, data: bytes) -> None:
        """The final response as the last event; the stream ends."""
        last = h11.Data(data=m.encode_sse(data.decode()))
        await self.connection._write(last, h11.EndOfMessage(), final=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m mrtr_transports.server.http.server [--host H] [--port P] ...``: the one
    serve entry (:func:`mrtr_transports.server.entry.main`), serving HTTP."""
    from .. import entry

    return entry.main(entry.HTTP_MODULE, argv)


if __name__ == "__main__":
    sys.exit(main())
