"""A raw HTTP/1.1 client (h11 on a trio socket) for the fault tests: round by round, by hand.

The project's client hides legs, retries and connections; a fault test needs
to hold them: send a request byte by byte, read a response slowly or not at
all, drop a connection in the middle of an SSE stream, send a retry with a
chosen ``requestState`` to another server.  :class:`RawHttp` is one TCP
connection to ``127.0.0.1``; the message builders make the 2026-07-28
requests (``_meta`` and the mirrored headers, as ``mrtr_core.http`` says).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import h11
import trio

import mrtr_core as m

VERSION = "2026-07-28"
ACCEPT_BOTH = "application/json, text/event-stream"
#: The capabilities the fault tests' requests declare.
CAPABILITIES: dict[str, Any] = {"elicitation": {}}


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    rid: int | str = 1,
    progress_token: str | None = None,
) -> dict[str, Any]:
    """A 2026-07-28 ``tools/call`` request (first leg)."""
    meta: dict[str, Any] = {
        m.wire.META_PROTOCOL_VERSION: VERSION,
        m.wire.META_CLIENT_CAPABILITIES: CAPABILITIES,
    }
    if progress_token is not None:
        meta["progressToken"] = progress_token
    params = {"name": name, "arguments": dict(arguments or {}), "_meta": meta}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def retry_of(
    first: Mapping[str, Any],
    answers: Mapping[str, Any],
    state: str | None,
    *,
    rid: int | str = 2,
) -> dict[str, Any]:
    """The retry leg of ``first`` with ``answers`` and the ``requestState`` received."""
    params = m.engine.build_retry_params(first["params"], answers, state)
    return {**first, "id": rid, "params": params}


def echo(text: str) -> dict[str, Any]:
    """The answer ``support.load_app``'s questions expect: the form accepted, ``echo`` set."""
    return {"action": "accept", "content": {"echo": text}}


@attrs.frozen
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers.get("content-type") == "application/json", self
        return json.loads(self.body)

    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages of the reply: its JSON body, or each SSE event's data."""
        if self.headers.get("content-type") != "text/event-stream":
            return [self.json()]
        return sse_messages(self.body)

    def final(self) -> dict[str, Any]:
        """The last message: the response."""
        return self.messages()[-1]


def sse_messages(body: bytes) -> list[dict[str, Any]]:
    decoder = m.http.SseDecoder()
    decoder.feed(body)
    decoder.feed_eof()
    found = []
    while (event := decoder.next_event()) is not m.wire.END_OF_STREAM:
        if isinstance(event, m.http._sse.SseEvent) and event.data:
            found.append(json.loads(event.data))
    return found


class ClosedEarly(Exception):
    """The server closed the connection before its response (or in the middle of it)."""


class RawHttp:
    """One HTTP/1.1 connection to the endpoint at ``port`` on 127.0.0.1."""

    def __init__(self, stream: trio.SocketStream, port: int, path: str = "/mcp") -> None:
        self.stream = stream
        self.authority = f"127.0.0.1:{port}"
        self.path = path
        self.h11 = h11.Connection(h11.CLIENT)
        self._response = h11.Response(status_code=599, headers=[])
        self._body = bytearray()  # of the response being read

    @classmethod
    async def connect(cls, port: int, *, receive_buffer: int | None = None) -> RawHttp:
        """Connect; ``receive_buffer`` shrinks the socket's receive buffer (a reader
        that takes little at a time)."""
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        if receive_buffer is not None:
            import socket

            stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        return cls(stream, port)

    def request_bytes(self, message: Mapping[str, Any], *, accept: str = ACCEPT_BOTH) -> bytes:
        """The whole POST that carries ``message``, as bytes."""
        body = json.dumps(message).encode()
        headers: Sequence[tuple[str, str]] = [
            ("Host", self.authority),
            ("Accept", accept),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            *m.http.request_headers(message),
        ]
        data = self.h11.send(h11.Request(method="POST", target=self.path, headers=headers))
        return (
            (data or b"")
            + (self.h11.send(h11.Data(data=body)) or b"")
            + (self.h11.send(h11.EndOfMessage()) or b"")
        )

    async def send(self, message: Mapping[str, Any], *, accept: str = ACCEPT_BOTH) -> None:
        await self.stream.send_all(self.request_bytes(message, accept=accept))

    async def trickle(self, data: bytes, interval: float, stop: trio.Event | None = None) -> int:
        """Send ``data`` one byte every ``interval`` seconds (until ``stop`` is set);
        the bytes sent."""
        for index in range(len(data)):
            if stop is not None and stop.is_set():
                return index
            await self.stream.send_all(data[index : index + 1])
            await trio.sleep(interval)
        return len(data)

    async def next_event(self, read_size: int = 65536) -> Any:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.stream.receive_some(read_size))
                continue
            return event

    async def head(self) -> h11.Response:
        """The next response's head (its body is read by :meth:`body`)."""
        response = await self.next_event()
        while isinstance(response, h11.InformationalResponse):
            response = await self.next_event()
        if isinstance(response, h11.ConnectionClosed):
            raise ClosedEarly("the server closed the connection before its response")
        assert isinstance(response, h11.Response), response
        self._response = response
        self._body = bytearray()
        return response

    async def read_until(self, marker: bytes) -> bytes:
        """After :meth:`head`: the body read until it holds ``marker`` (the rest unread)."""
        while marker not in self._body:
            if not await self._more():
                raise ClosedEarly(f"the response ended before {marker!r}")
        return bytes(self._body)

    async def _more(self, read_size: int = 65536) -> bool:
        event = await self.next_event(read_size)
        if isinstance(event, h11.EndOfMessage):
            return False
        if isinstance(event, h11.ConnectionClosed):
            raise ClosedEarly("the server closed the connection in the middle of a response")
        assert isinstance(event, h11.Data), event
        self._body += event.data
        return True

    async def body(self, *, read_size: int = 65536, pause: float = 0.0) -> Reply:
        """After :meth:`head`: the rest of the body (``read_size`` bytes at a time,
        ``pause`` seconds between reads: a slow reader), and the whole reply."""
        while await self._more(read_size):
            if pause:
                await trio.sleep(pause)
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        headers = {k.decode(): v.decode() for k, v in self._response.headers}
        return Reply(self._response.status_code, headers, bytes(self._body))

    async def reply(self, **kw: Any) -> Reply:
        """The next response, whole."""
        await self.head()
        return await self.body(**kw)

    async def post(self, message: Mapping[str, Any], **kw: Any) -> Reply:
        await self.send(message)
        return await self.reply(**kw)

    async def read_to_end(self) -> bytes:
        """Everything the server sends until it closes the connection (or resets it)."""
        received = bytearray()
        try:
            while data := await self.stream.receive_some(65536):
                received += data
        except trio.BrokenResourceError:
            pass
        return bytes(received)

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


async def post_once(port: int, message: Mapping[str, Any]) -> Reply:
    """``message`` on a connection of its own."""
    conn = await RawHttp.connect(port)
    try:
        return await conn.post(message)
    finally:
        await conn.aclose()


async def post_when_served(port: int, message: Mapping[str, Any], attempts: int = 100) -> Reply:
    """``message`` on a connection of its own, connecting again while the server refuses
    (a 503, or the connection closed or reset before a response): a client's retry."""
    for _ in range(attempts):
        try:
            reply = await post_once(port, message)
        except (trio.BrokenResourceError, h11.RemoteProtocolError, ClosedEarly):
            reply = None  # reset with the 503 unread, or closed before any response
        if reply is not None and reply.status != 503:
            return reply
        await trio.sleep(0.05)
    raise AssertionError(f"still refused after {attempts} attempts")


async def hold_served(port: int, count: int, attempts: int = 100) -> list[RawHttp]:
    """``count`` connections open at once, each one served (a first leg of ``relay``
    answered on it): proof that the server has that many slots free.  A connection
    refused while a slot is still being released is made again."""
    held: list[RawHttp] = []
    for _ in range(attempts):
        if len(held) == count:
            return held
        conn = await RawHttp.connect(port)
        try:
            reply = await conn.post(tool_call("relay", {"n": len(held)}))
        except (trio.BrokenResourceError, h11.RemoteProtocolError, ClosedEarly):
            reply = None
        if reply is not None and reply.status == 200:
            held.append(conn)
            continue
        await conn.aclose()
        await trio.sleep(0.05)
    raise AssertionError(f"only {len(held)} of {count} connections served")


async def hold_busy(port: int, count: int, seconds: float) -> list[RawHttp]:
    """``count`` connections each running ``pause`` for ``seconds``, every one seen
    started (its stream's first progress notification read): ``count`` busy slots."""
    held = []
    for index in range(count):
        conn = await RawHttp.connect(port)
        await conn.send(tool_call("pause", {"seconds": seconds}, progress_token=f"hold{index}"))
        await conn.head()
        await conn.read_until(b"notifications/progress")
        held.append(conn)
    return held
