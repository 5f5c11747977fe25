"""The Streamable HTTP client (protocol 2026-07-28) on anyio and h11.

The model: one client ``Connection(framing="messages")``; every message it
wants sent becomes its own POST to the endpoint, run as a task that reads the
response and feeds each JSON-RPC message it carries to the connection:

* ``202`` (a notification was accepted): nothing to read;
* ``application/json``: the body is one message;
* ``text/event-stream``: read incrementally with ``mrtr_core.http.SseDecoder``, each
  event's ``data`` one message (progress, log messages, then the answer), to
  the end of the stream;
* a 4xx/5xx whose body is a JSON-RPC error is fed as that error (given the
  request's id when the server could not read it); any other failure is a
  :class:`~mrtr_transports.client.errors.TransportError` whose ``kind`` tells a
  refused connection (``"connect"``), a connect timeout (``"timeout"``), a
  broken stream (``"disconnect"``) and an HTTP failure (``"http"``) apart.

A stream that breaks, or ends, before the answer to its leg makes the client
call ``leg_broken``: the engine re-issues the leg as a new request with a new
id (Streamable HTTP 2026 has no resumption).  Cancelling a leg (a timeout,
the caller giving up) closes its stream: that *is* the cancellation.

Every POST carries ``Accept: application/json, text/event-stream``,
``Content-Type: application/json``, ``MCP-Protocol-Version`` (the ``_meta``
version), ``Mcp-Method``, ``Mcp-Name`` (``params.name`` of ``tools/call`` and
``prompts/get``, ``params.uri`` of ``resources/read``) and, for
``tools/call``, one ``Mcp-Param-{Name}`` per argument whose property in the
tool's ``inputSchema`` is annotated ``x-mcp-header`` (from the last
``tools/list``; tools with invalid annotations are dropped from it).  Values
that are not plain visible ASCII, have surrounding whitespace or look like the
sentinel are sent as ``=?base64?{base64 of UTF-8}?=``.

The era probe works as on stdio (``server/discover`` first); a 400/404/405
whose body is not a recognised modern error means a 2025 server: the client
then speaks 2025-11-25 Streamable HTTP, a session
(:mod:`~mrtr_transports.client.http_sessions`: ``Mcp-Session-Id``, the GET
stream, resumption with ``Last-Event-ID``, DELETE on close).

Retries: a POST the server provably did not process is sent again, as it is
(same message, same id), on another connection, up to ``retry_attempts``
attempts in all (3; 1 turns retrying off).  Two cases qualify:

* a kept-alive connection that fails before any byte of a response: the
  server closed it while it sat in the pool, unread.  An idle connection the
  server has closed is noticed before it is used, and dropped; neither costs
  an attempt (there are at most as many as the pool holds);
* a refusal that says so: HTTP 503 with ``Retry-After`` (whole seconds) and a
  JSON-RPC error of code ``SERVER_BUSY`` (-32000).  Our server writes that
  only before a request reaches the app (every slot busy, or the connection
  evicted while its request was arriving): no handler ran, no
  ``requestState`` was spent.  ``Retry-After`` (a little more, so refused
  requests do not all come back together) is how long to wait before a *new*
  connection; a kept-alive connection of ours, which the server already holds
  a place for, may carry the retry as soon as one is free.  A server that
  asks for more than ``retry_max_delay`` seconds (5) is not retried.

When the attempts are used up, the refusal is a ``TransportError`` with
``status=503`` and the server's message.  If sending fails (the server
answered and closed without reading the rest), the response it sent is still
read: a refusal is never reported as a mere broken pipe.

Bounds: ``max_connections`` POSTs at once (more wait for a connection) and as
many idle keep-alive connections kept for reuse; a JSON body or an SSE event
at most ``max_message_size``; an error body read up to 64 KiB.
"""

from __future__ import annotations

import logging
import math
import random
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, Unpack

import anyio
import h11
from anyio.abc import TaskGroup

import mrtr_core as m
from mrtr_core.http import InvalidHeaderAnnotation, request_headers, schema_header_params
from mrtr_core.http._headers import called_tool

from .._loop import LoopTools
from .client import Client
from .errors import TransportError
from .http_connection import (
    REASONS,
    Broken,
    Failed,
    HttpConnection,
    Refused,
    Stale,
    check_refusal,
    error_body_text,
)
from .http_endpoint import Endpoint
from .http_sessions import HttpSession
from .http_streams import SseSink, read_answer_stream
from .link import ClientOptions, LinkClient, Outbound
from .oauth.authorized import Challenged, send_authorized
from .oauth.provider import OAuthProvider
from .opening import open_client
from .person_time import PersonTime
from .tcp import connect, connect_failure

logger = logging.getLogger("mrtr.client.http")

MAX_ERROR_BODY = 64 * 1024
DEFAULT_RETRY_ATTEMPTS = 3
DEFAULT_RETRY_MAX_DELAY = 5.0
_ACCEPT = "application/json, text/event-stream"


class HttpLink:
    """A Streamable HTTP endpoint as the client's link (see the module docstring)."""

    framing: Literal["lines", "messages"] = "messages"
    needs_messages = True
    wants_tool_list = True
    confirms_transmission = True  # a message is sent once its POST is written
    cancellation: Literal["notify", "close_stream"] = "close_stream"  # close_stream(id)

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        max_connections: int = 16,
        connect_timeout: float = 10.0,
        max_message_size: int = m._connection._options.DEFAULT_MAX_MESSAGE_SIZE,
        ssl_context: ssl.SSLContext | None = None,
        retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
        retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY,
        auth: OAuthProvider | None = None,
    ) -> None:
        #: The OAuth client that gives each POST its token and answers 401/403 (or None).
        self.auth = auth
        #: Where the POSTs go and what each carries (``ValueError`` for a bad URL).
        self.endpoint = Endpoint.parse(url, headers, connect_timeout)
        if not isinstance(retry_attempts, int) or retry_attempts < 1:
            raise ValueError("retry_attempts must be a positive integer (1: no retries)")
        if not retry_max_delay >= 0:
            raise ValueError("retry_max_delay must be a number of seconds, 0 or more")
        self._ssl_context = ssl_context
        self.max_message_size = max_message_size
        self.retry_attempts = retry_attempts
        self.retry_max_delay = retry_max_delay
        self._slots = anyio.Semaphore(max_connections)
        self._returned = anyio.Event()  # set when a connection goes back to the pool
        self._pool_size = max_connections
        self._idle: list[HttpConnection] = []
        self._streams: dict[m.RequestId, anyio.CancelScope] = {}
        self._header_params: dict[str, dict[str, tuple[str, ...]]] = {}
        self._discover_failure: str | None = None
        self._session: HttpSession | None = None  # a 2025 session, once initialize goes out
        self._client: LinkClient | None = None
        self._sink: SseSink | None = None  # (what reading a stream needs: the client)
        self._task_group: TaskGroup | None = None
        self._closed = False
        #: The loop's clock, events and cancel scopes (looked up once: ``_loop.py``).
        self.loop: LoopTools | None = None

    async def start(self, client: LinkClient, task_group: TaskGroup) -> None:
        self._client = client
        self._task_group = task_group
        self.loop = LoopTools()
        self._sink = SseSink(client, self.max_message_size, self.loop)

    async def restart(self, client: LinkClient, task_group: TaskGroup) -> None:
        """A new client connection over the same endpoint (a new era): forget the last."""
        self._session = None
        self._discover_failure = None
        await self.start(client, task_group)

    @property
    def person_time(self) -> PersonTime | None:
        """The OAuth provider's person at work, whose time the client's timers do not
        count (``None``: no provider)."""
        return None if self.auth is None else self.auth.person_time

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def connect_timeout(self) -> float:
        return self.endpoint.connect_timeout

    @property
    def extra_headers(self) -> tuple[tuple[str, str], ...]:
        """The caller's ``headers=``, on every request."""
        return self.endpoint.extra_headers

    @property
    def session(self) -> HttpSession | None:
        """The 2025 session, when the era is legacy."""
        return self._session

    async def _new_connection(self) -> HttpConnection:
        """A new connection (never a pooled one), for the session; raises ``Failed``."""
        found = await self._connection(new=True, pooled=False)
        assert found is not None
        return found[0]

    # --- Link --------------------------------------------------------------------

    def transmit(self, out: Outbound) -> None:
        assert self._client is not None and self._task_group is not None
        if self._closed:
            return
        if out.method == "initialize":
            if self._discover_failure:
                logger.info("%s: %s; opening a 2025 session", self.url, self._discover_failure)
            assert self._sink is not None
            self._session = HttpSession(self.endpoint, self._sink, self._new_connection)
        if out.method == "notifications/cancelled" and self._session is None:
            return  # 2026 HTTP cancels by closing the request's stream, never by a message
        if self._session is not None and self._session.expired:
            return  # every call already failed with the expiry
        assert self.loop is not None
        scope = self.loop.cancel_scope()
        if out.request_id is not None:
            self._streams[out.request_id] = scope
        self.loop.spawn(self._task_group, self._exchange, out, scope)

    def close_stream(self, request_id: m.RequestId) -> None:
        scope = self._streams.pop(request_id, None)
        if scope is not None:
            scope.cancel()

    def tools_listed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        table: dict[str, dict[str, tuple[str, ...]]] = {}
        for tool in tools:
            name = tool.get("name")
            if not isinstance(name, str):
                logger.warning("dropping a tool without a name from tools/list")
                continue
            try:
                table[name] = schema_header_params(tool.get("inputSchema"))
            except InvalidHeaderAnnotation as exc:
                logger.warning("dropping tool %r: invalid x-mcp-header annotation: %s", name, exc)
                continue
            kept.append(tool)
        self._header_params = table
        return kept

    async def aclose(self) -> None:
        self._closed = True
        if self._session is not None:
            self._session.closing = True
        for scope in self._streams.values():
            scope.cancel()
        self._streams.clear()
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()
        if self._session is not None:
            await self._session.end()

    # --- One POST ----------------------------------------------------------------------

    def request_headers(self, out: Outbound) -> list[tuple[str, str]]:
        """The headers of the POST that carries ``out``."""
        message = out.message or {}
        assert self._client is not None
        tool = called_tool(message)
        session = self._session
        endpoint = self.endpoint
        if session is not None:  # 2025: no Mcp-* mirroring, the session headers instead
            return [
                ("Host", endpoint.authority),
                ("Accept", _ACCEPT),
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(out.data))),
                ("User-Agent", "mrtr"),
                *session.headers(out.method),
                *endpoint.extra_headers,
            ]
        headers = [
            ("Host", endpoint.authority),
            ("Accept", _ACCEPT),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(out.data))),
            ("User-Agent", "mrtr"),
            *request_headers(
                message,
                protocol_version=self._client.protocol_version,
                header_params=self._header_params.get(tool) if tool is not None else None,
            ),
            *endpoint.extra_headers,
        ]
        return headers

    async def _exchange(self, out: Outbound, scope: anyio.CancelScope) -> None:
        assert self._client is not None
        with scope:
            session = self._session
            if session is not None and out.kind in ("plain", "leg"):  # (not the handshake)
                await session.standalone_ready()  # see HttpSession.standalone_ready
            try:
                await self._post(out)
            except Failed as failure:
                if out.method == "server/discover" and not self._discover_failure:
                    self._discover_failure = failure.error.message
                self._client.response_failed(out, failure.error, broken=failure.broken)
            else:
                self._client.response_ended(out)
            finally:
                if out.request_id is not None and self._streams.get(out.request_id) is scope:
                    del self._streams[out.request_id]

    async def _post(self, out: Outbound) -> None:
        """Send ``out`` with the token the ``auth`` provider gives (if any); after a 401
        or 403 it may answer with a new one, then ``out`` goes again (a bounded number of
        times: ``MAX_AUTHORIZATIONS_PER_REQUEST``)."""
        auth = self.auth
        if auth is None:
            await self._post_once(out, self.request_headers(out))
            return

        async def with_token(authorization: list[tuple[str, str]]) -> None:
            await self._post_once(out, [*self.request_headers(out), *authorization])

        try:
            await send_authorized(auth, with_token, method="POST", url=self.url)
        except Challenged as refused:
            error = self._status_error(out, refused.status, refused.body)
            raise Failed(error, broken=False) from None
        except TransportError as failure:  # (the provider's: AuthorizationFailed, FetchFailed)
            raise Failed(failure, broken=False) from None

    async def _post_once(self, out: Outbound, headers: list[tuple[str, str]]) -> None:
        """Send ``out`` and read its response, retrying what the server did not process."""
        assert self.loop is not None
        now = self.loop.now
        attempt = stale = 0
        new_after = -math.inf  # no new connection before then (a refusal's Retry-After)
        async with self._slots:  # one POST in progress, however many attempts it takes
            while True:
                # Until the server's delay is over, only a connection of ours it already
                # holds a place for will do: wait for one to come back to the pool.
                while (found := await self._connection(new=now() >= new_after)) is None:
                    with anyio.CancelScope(deadline=new_after):
                        await self._returned.wait()
                attempt += 1
                # A stale kept-alive connection costs no attempt: each is dropped from the
                # pool, so there are at most as many as the pool holds.
                resend_stale = self.retry_attempts > 1 and stale < self._pool_size
                try:
                    await self._attempt(out, headers, *found, resend_stale=resend_stale)
                    return
                except Stale:
                    logger.debug("%s: a kept-alive connection closed under it", out.method)
                    attempt -= 1
                    stale += 1
                except Refused as refusal:
                    too_long = refusal.retry_after > self.retry_max_delay
                    if found[1] and resend_stale and not too_long:
                        # A kept-alive connection the server evicted while it was idle,
                        # answered with a courtesy 503: a stale one, no attempt spent.
                        attempt -= 1
                        stale += 1
                    elif attempt >= self.retry_attempts or too_long:
                        raise self._refused(out, refusal, attempt) from None
                    # The server said when; spread a little, so refused ones do not all
                    # come back together.
                    delay = refusal.retry_after * (1 + random.random() / 2)
                    new_after = now() + delay
                    logger.debug("%s refused (%s): retry in %.2f s", out.method, refusal, delay)

    def _refused(self, out: Outbound, refusal: Refused, attempts: int) -> Failed:
        tries = f"{attempts} attempts" if attempts > 1 else "1 attempt"
        return Failed(
            TransportError(
                f"{self.url} refused {out.method} (HTTP 503, Retry-After: "
                f"{refusal.retry_after} s; {tries}): {refusal.message}",
                kind="http",
                status=503,
            ),
            broken=False,
        )

    async def _attempt(
        self,
        out: Outbound,
        headers: list[tuple[str, str]],
        conn: HttpConnection,
        reused: bool,
        *,
        resend_stale: bool,
    ) -> None:
        """One POST on ``conn`` (a slot held); ``Stale`` or ``Refused`` when it may go
        again (on another connection: this one is closed), ``Failed`` when it failed."""
        try:
            response = await self._send(out, conn, headers)
        except Broken as exc:
            await conn.aclose()
            if reused and not conn.received and resend_stale:
                raise Stale from exc
            raise Failed(
                TransportError(f"POST {out.method} to {self.url}: {exc}"), broken=True
            ) from exc
        except BaseException:  # cancelled (the leg, or the client) before the answer
            await conn.aclose()
            raise
        try:
            await self._read_response(out, conn, response)
        except Broken as exc:
            raise Failed(
                TransportError(f"the response to {out.method} broke: {exc}"), broken=True
            ) from exc
        finally:
            if conn.reusable() and not self._closed:
                conn.h11.start_next_cycle()
                conn.received = False
                self._idle.append(conn)
                self._returned.set()  # (a request waiting to retry may take it)
                self._returned = self.loop.event() if self.loop else anyio.Event()
            else:
                await conn.aclose()

    async def _send(
        self, out: Outbound, conn: HttpConnection, headers: list[tuple[str, str]]
    ) -> Any:
        """Write the POST, then read the head of its response.

        A server may answer before it has read the request (a refusal) and close: the
        rest of our write then fails.  The answer it sent is read all the same; only
        when there is none does the failed write stand.
        """
        assert self._client is not None
        failed: Broken | None = None
        try:
            await conn.send(
                h11.Request(method="POST", target=self.endpoint.target, headers=headers),
                h11.Data(data=out.data),
                h11.EndOfMessage(),
            )
        except Broken as exc:
            failed = exc
        else:
            self._client.transmitted(out)  # (for the trace: it is on the wire)
        try:
            response = await conn.next_event()
            while isinstance(response, h11.InformationalResponse):
                response = await conn.next_event()
        except Broken:
            if failed is None:
                raise
            raise failed from None
        return response

    async def _connection(
        self, *, new: bool = True, pooled: bool = True
    ) -> tuple[HttpConnection, bool] | None:
        """A kept-alive connection (if ``pooled``), else a new one (if ``new``: else None);
        and whether it is reused."""
        while pooled and self._idle:
            conn = self._idle.pop()
            if not conn.stale():
                return conn, True
            await conn.aclose()  # closed by the server while it sat here
        if not new:
            return None
        endpoint = self.endpoint
        where = f"{endpoint.host}:{endpoint.port}"
        try:
            with anyio.fail_after(endpoint.connect_timeout):
                https = endpoint.https
                tls = (self._ssl_context or ssl.create_default_context()) if https else None
                stream = await connect(endpoint.host, endpoint.port, tls=tls)
        except TimeoutError as exc:
            raise Failed(
                TransportError(
                    f"connecting to {where} timed out after {endpoint.connect_timeout:g} s",
                    kind="timeout",
                ),
                broken=False,
            ) from exc
        except OSError as exc:
            raise Failed(
                TransportError(
                    f"could not connect to {where}: {connect_failure(exc)}", kind="connect"
                ),
                broken=False,
            ) from exc
        return HttpConnection(stream), False

    async def _read_response(self, out: Outbound, conn: HttpConnection, response: Any) -> None:
        assert self._client is not None
        status = response.status_code
        content_type = ""
        for name, value in response.headers:
            if name == b"content-type":
                content_type = value.decode("latin-1").split(";")[0].strip().lower()
        if self.auth is not None and status in (401, 403):
            body = await self._body(conn, MAX_ERROR_BODY)
            raise Challenged.from_response(status, response.headers, body or b"")
        session = self._session
        if session is not None:
            session.took_response(out.method, status, response.headers)
            if session.is_expiry(out.method, status):
                await self._body(conn, MAX_ERROR_BODY)
                self._client.link_lost(session.expiry_error(out.method))
                return
        if out.request_id is None or status == 202:
            body = await self._body(conn, MAX_ERROR_BODY)
            if status >= 300:
                check_refusal(status, response.headers, content_type, body)
                raise Failed(self._status_error(out, status, b""), broken=False)
            if session is not None and out.method == "notifications/initialized":
                assert self._task_group is not None
                session.initialized(self._task_group)
            return
        if 200 <= status < 300 and content_type == "text/event-stream":
            assert self._sink is not None
            await read_answer_stream(self._sink, out, conn, session)
            return
        limit = self.max_message_size if 200 <= status < 300 else MAX_ERROR_BODY
        body = await self._body(conn, limit)
        check_refusal(status, response.headers, content_type, body)
        if content_type.endswith("json"):
            error = _jsonrpc_error(body, out.request_id)
            if 200 <= status < 300:
                if body is not None:
                    self._client.receive_data(error if error is not None else body)
                return
            if error is not None:
                if out.method == "server/discover":
                    self._discover_failure = f"server/discover got HTTP {status}"
                self._client.receive_data(error)
                return
        if 200 <= status < 300:
            raise Failed(
                TransportError(
                    f"{self.url} answered {out.method} with Content-Type {content_type!r}",
                    kind="http",
                    status=status,
                ),
                broken=False,
            )
        raise Failed(self._status_error(out, status, body or b""), broken=False)

    def _status_error(self, out: Outbound, status: int, body: bytes) -> TransportError:
        reason = REASONS.get(status, "")
        snippet = error_body_text(body)
        detail = f": {snippet}" if snippet else ""
        return TransportError(
            f"{self.url} answered {out.method} with HTTP {status}{reason}{detail}",
            kind="http",
            status=status,
        )

    async def _body(self, conn: HttpConnection, limit: int) -> bytes | None:
        """The whole body, or None if it passed ``limit`` (the rest is drained)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await conn.next_event()
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size <= limit:
                    chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
        if size > limit:
            logger.warning("dropped a response body of %d bytes (limit %d)", size, limit)
            return None
        return b"".join(chunks)


def _jsonrpc_error(body: bytes | None, request_id: m.RequestId) -> bytes | None:
    """``body`` when it is a JSON-RPC error response, given ``request_id`` if it has none."""
    if not body or b'"error"' not in body:
        return None
    try:
        value = m.wire._codec.default_codec.loads(body)
    except m.MrtrError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("error"), dict):
        return None
    if value.get("id") is None:
        value = {**value, "id": request_id}
    return m.wire._codec.default_codec.dumps(value)


@asynccontextmanager
async def open_http_client(
    url: str,
    *,
    headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
    max_connections: int = 16,
    connect_timeout: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
    retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
    retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY,
    auth: OAuthProvider | None = None,
    **client_options: Unpack[ClientOptions],
) -> AsyncIterator[Client]:
    """A :class:`~mrtr_transports.client.client.Client` for the Streamable HTTP endpoint ``url``,
    its era settled on entry.  ``headers`` go on every POST (e.g. ``Authorization``);
    ``client.link`` is the :class:`HttpLink`.  ``retry_attempts`` (3; 1: none) bounds the
    attempts at a POST the server did not process (a stale kept-alive connection, a 503
    ``SERVER_BUSY`` refusal), ``retry_max_delay`` (5 s) the ``Retry-After`` honoured.
    ``auth``: an :class:`~mrtr_transports.client.oauth.OAuthProvider` (OAuth 2.1 as the
    specification's "Authorization" says: a 401 runs its flow, then the request goes again).
    Other options go to the ``Client``
    (:class:`~mrtr_transports.client.client.ClientOptions`: ``answer``, ``capabilities``, ...)."""
    link = HttpLink(
        url,
        headers=headers,
        max_connections=max_connections,
        connect_timeout=connect_timeout,
        max_message_size=client_options.get(
            "max_message_size", m._connection._options.DEFAULT_MAX_MESSAGE_SIZE
        ),
        ssl_context=ssl_context,
        retry_attempts=retry_attempts,
        retry_max_delay=retry_max_delay,
        auth=auth,
    )
    async with open_client(link, **client_options) as client:
        yield client
