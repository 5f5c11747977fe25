"""The 2025-11-25 Streamable HTTP session of the HTTP client (``HttpLink``'s legacy era).

The model: when the era probe falls back to ``initialize``, the link keeps one
:class:`HttpSession`.  The ``initialize`` POST goes out without session
headers; the ``Mcp-Session-Id`` of its response (checked: visible ASCII,
bounded, :func:`mrtr_core.http.check_session_id`) and the negotiated
``MCP-Protocol-Version`` go on every later request.  Everything else is the
link's ordinary POST exchange: an answer as JSON or SSE; the server's own
requests (elicitation, sampling, roots, ping) arrive on a POST's SSE stream
(or the GET stream), the client answers them through its 2025 path, and each
answer is its own POST (202).

* **The GET stream.**  Once ``notifications/initialized`` is accepted, a GET
  opens the standalone SSE stream for what the server sends outside any
  request.  405 means the server offers none: fine.
* **Resumption.**  Every SSE stream remembers its last event id and the
  server's ``retry`` (:class:`mrtr_core.http.StreamResumption`); a
  stream that breaks is resumed with a GET carrying ``Last-Event-ID``, at most
  ``DEFAULT_RESUME_ATTEMPTS`` times in a row without a new event, waiting
  ``retry`` (at most 30 s) before each.  A stream that cannot be resumed (no
  event ids, or the attempts spent) fails its request; unlike a 2026-07-28 leg
  it is never sent again (it may already have had its effects).
* **Expiry.**  A 404 on a request that carries the session id means the
  server ended the session.  We do not re-initialize behind the caller's back
  (the server forgot everything the session held, and a call in flight may
  already have had effects): every call fails with ``TransportError(kind=
  "session")`` saying so, and the caller opens a new client.
* **Closing.**  ``aclose`` sends DELETE with the session id (bounded by the
  connect timeout; a 405 is the server declining: fine).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import h11
from anyio.abc import TaskGroup

import mrtr_core as m
from mrtr_core.http import (
    Header,
    StreamResumption,
    check_session_id,
    session_headers,
)

from .errors import TransportError
from .http_connection import Broken, Failed, HttpConnection
from .http_endpoint import Endpoint
from .http_streams import SseSink, read_sse

logger = logging.getLogger("mrtr.client.http")

_SESSION_HEADER = Header.SESSION_ID.lower().encode("ascii")
#: The longest a session's request waits for the GET stream to open (seconds).
STANDALONE_WAIT = 5.0


class HttpSession:
    """One 2025 session of an :class:`~mrtr_transports.client.http.HttpLink`: its
    ``endpoint``, where its streams' messages go (``sink``: the client), and
    ``connect``, which opens a new connection to the endpoint (raises ``Failed``)."""

    def __init__(
        self,
        endpoint: Endpoint,
        sink: SseSink,
        connect: Callable[[], Awaitable[HttpConnection]],
    ) -> None:
        self.endpoint = endpoint
        self.sink = sink
        self._connect = connect
        #: The link is closing: no GET stream is opened or resumed any more.
        self.closing = False
        #: The server's ``Mcp-Session-Id`` (``None``: it assigned none, a stateless server).
        self.id: str | None = None
        self.expired = False
        self._listening = False
        #: Set once the GET stream's first attempt is answered (a stream, 405, a failure).
        self.standalone_settled = anyio.Event()

    # --- Headers and responses -----------------------------------------------------

    def headers(self, method: str | None) -> list[tuple[str, str]]:
        """The session headers of a request for ``method``."""
        client = self.sink.client
        version = client.protocol_version if client.era == "legacy" else None
        return session_headers(self.id, version, method=method)

    def took_response(self, method: str | None, status: int, headers: Any) -> None:
        """Read the session id from the answer to ``initialize``; ``Failed`` when it is
        malformed (a server we cannot follow)."""
        if method != "initialize" or not 200 <= status < 300:
            return
        raw = next((value for name, value in headers if name == _SESSION_HEADER), None)
        if raw is None:
            return
        try:
            self.id = check_session_id(raw)
        except m.RemoteProtocolError as exc:
            error = TransportError(exc.message, kind="http", status=status)
            raise Failed(error, broken=False) from exc

    def is_expiry(self, method: str | None, status: int) -> bool:
        """A 404 to a request that carried our session id: the session is gone."""
        return status == 404 and self.id is not None and method != "initialize"

    def expiry_error(self, method: str | None) -> TransportError:
        self.expired = True
        return TransportError(
            f"{self.endpoint.url} ended the 2025 session {self.id!r} (HTTP 404 to {method}): "
            "the server forgot it (expired or restarted); open a new client",
            kind="session",
            status=404,
        )

    # --- The standalone GET stream ------------------------------------------------------

    def initialized(self, task_group: TaskGroup) -> None:
        """``notifications/initialized`` was accepted: open the GET stream (once)."""
        if self._listening or self.closing:
            self.standalone_settled.set()
            return
        self._listening = True
        task_group.start_soon(self._listen)

    async def standalone_ready(self) -> None:
        """Wait (at most ``STANDALONE_WAIT`` seconds) until the GET stream is open or
        known not to be: a server may send its requests on that stream, unrelated to any
        POST (the spec allows it; the official TypeScript server's ``elicitInput`` does),
        and one sent before the stream exists is lost, so a session's requests wait."""
        with anyio.move_on_after(STANDALONE_WAIT):
            await self.standalone_settled.wait()

    async def _listen(self) -> None:
        resumption = StreamResumption()
        last_id: str | None = None
        try:
            await self._listen_on(resumption, last_id)
        finally:
            self.standalone_settled.set()

    async def _listen_on(self, resumption: StreamResumption, last_id: str | None) -> None:
        while not self.closing and not self.expired:
            try:
                opened = await self.get(last_id)
            except (Failed, Broken) as exc:
                logger.info("the GET stream of %s failed: %s", self.endpoint.url, exc)
                return
            finally:
                self.standalone_settled.set()
            if opened is None:
                return  # 405 (no stream offered), or an answer that is no stream
            conn, _ = opened
            try:
                await read_sse(self.sink, conn, resumption, stop_when=None)
                return  # the server ended it: it may open another one later, we do not ask
            except Broken as exc:
                logger.info("the GET stream of %s broke: %s", self.endpoint.url, exc)
            finally:
                await conn.aclose()
            delay = resumption.next_delay()
            if delay is None:
                return
            last_id = resumption.last_event_id
            await anyio.sleep(delay)

    # --- GET (a new stream, or a broken one resumed) ------------------------------------

    async def get(self, last_event_id: str | None) -> tuple[HttpConnection, Any] | None:
        """Open a GET SSE stream (resuming after ``last_event_id`` if given): its
        connection and response head, or ``None`` when the server answered with no
        stream (the connection is then closed).  Raises ``Failed`` or ``Broken``."""
        endpoint = self.endpoint
        headers = [
            ("Host", endpoint.authority),
            ("Accept", "text/event-stream"),
            ("User-Agent", "mrtr"),
            *self.headers("GET"),
            *endpoint.extra_headers,
        ]
        if last_event_id is not None:
            headers.append((Header.LAST_EVENT_ID, last_event_id))
        conn = await self._connect()
        try:
            await conn.send(
                h11.Request(method="GET", target=endpoint.target, headers=headers),
                h11.EndOfMessage(),
            )
            response = await conn.next_event()
            while isinstance(response, h11.InformationalResponse):
                response = await conn.next_event()
        except BaseException:
            await conn.aclose()
            raise
        content_type = _content_type(response.headers)
        if response.status_code == 200 and content_type == "text/event-stream":
            return conn, response
        await conn.aclose()
        if self.is_expiry("GET", response.status_code):
            self.sink.client.link_lost(self.expiry_error("GET"))
        elif response.status_code != 405:
            logger.info("GET %s answered HTTP %d: no stream", endpoint.url, response.status_code)
        return None

    # --- Closing ----------------------------------------------------------------------

    async def end(self) -> None:
        """DELETE the session (best effort, bounded in time)."""
        self.closing = True
        endpoint = self.endpoint
        if self.id is None or self.expired:
            return
        headers = [
            ("Host", endpoint.authority),
            ("User-Agent", "mrtr"),
            ("Content-Length", "0"),
            *self.headers("DELETE"),
            *endpoint.extra_headers,
        ]
        with anyio.move_on_after(endpoint.connect_timeout):
            try:
                conn = await self._connect()
            except Failed:
                return
            try:
                await conn.send(
                    h11.Request(method="DELETE", target=endpoint.target, headers=headers),
                    h11.EndOfMessage(),
                )
                response = await conn.next_event()
                status = getattr(response, "status_code", 0)
                if status not in (200, 202, 204, 405):
                    logger.info("DELETE %s answered HTTP %d", endpoint.url, status)
            except Broken:
                pass
            finally:
                await conn.aclose()


def _content_type(headers: Any) -> str:
    for name, value in headers:
        if name == b"content-type":
            return str(value.decode("latin-1").split(";")[0].strip().lower())
    return ""
