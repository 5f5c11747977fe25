"""A raw WebSocket client for the server tests: wsproto on a trio socket, with a client
``mrtr_core.Connection(framing="messages")`` on top (the same methods as the stdio
tests' ``Peer``: ``write``, ``event``, ``request``, ``response``, ``call``, ``stats``).

It can also misbehave: send binary, invalid or oversized messages, never answer
pings, or offer no subprotocol.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

import mrtr_core as m

CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}


@attrs.frozen
class Refused:
    """The server refused the upgrade: its HTTP status and body."""

    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Closed(Exception):
    """The server closed the WebSocket (``code``, ``reason``)."""

    def __init__(self, code: int, reason: str | None) -> None:
        super().__init__(f"closed {code}: {reason}")
        self.code = code
        self.reason = reason


class WsPeer:
    """One WebSocket to the server, its messages read by a client connection."""

    def __init__(self, stream: trio.SocketStream, ws: WSConnection, conn: m.Connection) -> None:
        self.stream = stream
        self.ws = ws
        self.conn = conn
        self.answer_pings = True
        self.pings = 0
        self.received: list[dict[str, Any]] = []  # every message the server sent
        self.other: list[Any] = []
        self.closed: Closed | None = None
        self.pending = ""  # the start of a text message still arriving

    # --- frames ---

    async def send_event(self, event: Any) -> None:
        await self.stream.send_all(self.ws.send(event))

    async def write(self, data: bytes) -> None:
        if data:
            await self.send_event(TextMessage(data=data.decode()))

    async def read_messages(self) -> list[str]:
        """Read until at least one text message (or the close, raised as ``Closed``)."""
        texts: list[str] = []
        while not texts:
            if self.closed is not None:
                raise self.closed
            data = await self.stream.receive_some(65536)
            self.ws.receive_data(data or None)
            for event in self.ws.events():
                if isinstance(event, TextMessage):
                    self.pending += event.data  # (kept: a message may span two reads)
                    if event.message_finished:
                        texts.append(self.pending)
                        self.pending = ""
                elif isinstance(event, Ping):
                    self.pings += 1
                    # Not once we sent our Close: a ping that crossed it goes unanswered
                    # (wsproto sends nothing after a Close; seen under load, every 0.1 s pings).
                    if self.answer_pings and self.ws.state is ConnectionState.OPEN:
                        await self.send_event(event.response())
                elif isinstance(event, CloseConnection):
                    self.closed = Closed(event.code, event.reason)
                    if self.ws.state is ConnectionState.REMOTE_CLOSING:
                        await self.send_event(event.response())
                elif isinstance(event, (BytesMessage, Pong)):
                    pass
        return texts

    async def wait_closed(self) -> Closed:
        """Read (answering pings) until the server closes; its close."""
        try:
            while True:
                for text in await self.read_messages():
                    self.received.append(json.loads(text))
        except Closed as closed:
            return closed

    async def read_messages_for(self, seconds: float) -> None:
        """Read (answering pings) for ``seconds``; the server must not close meanwhile."""
        with trio.move_on_after(seconds):
            closed = await self.wait_closed()
            raise AssertionError(f"the server closed: {closed}")

    # --- messages, as the stdio tests' Peer ---

    async def event(self) -> Any:
        while True:
            event = self.conn.next_event(trio.current_time())
            if event is m.NEED_DATA:
                for text in await self.read_messages():
                    self.received.append(json.loads(text))
                    self.conn.receive_data(text.encode())
            elif isinstance(event, (m.HandshakeStep, m.AutoReply)):
                await self.write(self.conn.send(event))
            else:
                return event

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> m.ResultResponse | m.ErrorResponse:
        rid = self.conn.new_request_id()
        await self.write(self.conn.send(m.Request(id=rid, method=method, params=params)))
        return await self.response(rid)

    async def response(self, rid: m.RequestId) -> m.ResultResponse | m.ErrorResponse:
        while True:
            event = await self.event()
            if isinstance(event, (m.ResultResponse, m.ErrorResponse)) and event.id == rid:
                return event
            self.other.append(event)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answers: Mapping[str, Any] | None = None,
        legacy_answers: Mapping[str, Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> tuple[Any, list[Any]]:
        """Run a tools/call flow to its end: (the terminal engine event, all else seen)."""
        params = {"name": name, "arguments": dict(arguments or {})}
        handle = self.conn.call("tools/call", params, now=trio.current_time(), **options)
        seen: list[Any] = []
        while True:
            event = await self.event()
            seen.append(event)
            if isinstance(event, m.Request) and legacy_answers is not None:
                result = legacy_answers[event.method]
                await self.write(self.conn.send(m.ResultResponse(id=event.id, result=result)))
                continue
            if not (isinstance(event, m.CallEvent) and event.call == handle):
                continue
            step = event.event
            if isinstance(step, m.engine.SendRetry):
                await trio.sleep(step.delay)
            if isinstance(step, (m.engine.SendRequest, m.engine.SendRetry, m.engine.CancelLeg)):
                await self.write(self.conn.send(event))
            elif isinstance(step, m.engine.DispatchInput):
                assert answers is not None, step
                self.conn.provide(handle, step.key, answers[step.key], trio.current_time())
            elif isinstance(
                step, (m.engine.Done, m.engine.Failed, m.engine.Cancelled, m.engine.TimedOut)
            ):
                return step, seen

    async def stats(self) -> dict[str, int]:
        reply = await self.request("tools/call", {"name": "stats", "arguments": {}})
        assert isinstance(reply, m.ResultResponse), reply
        counts: dict[str, int] = reply.result["structuredContent"]
        return counts

    async def close(self, code: int = 1000) -> Closed:
        """Our close, then the server's answer."""
        await self.send_event(CloseConnection(code=code))
        return await self.wait_closed()


async def connect(
    address: tuple[str, int],
    *,
    path: str = "/mcp",
    subprotocols: Sequence[str] = ("mcp",),
    headers: Sequence[tuple[str, str]] = (),
    era: str = "modern",
    capabilities: Mapping[str, Any] = CAPS,
    **conn_options: Any,
) -> WsPeer | Refused:
    """Open a WebSocket to ``address``: the peer, or the server's refusal."""
    host, port = address
    stream = await trio.open_tcp_stream(host, port)
    ws = WSConnection(ConnectionType.CLIENT)
    extra = [(name.encode(), value.encode()) for name, value in headers]
    request = Request(
        host=f"{host}:{port}", target=path, subprotocols=list(subprotocols), extra_headers=extra
    )
    await stream.send_all(ws.send(request))
    status = 0
    body = b""
    while True:
        data = await stream.receive_some(65536)
        ws.receive_data(data or None)
        for event in ws.events():
            if isinstance(event, AcceptConnection):
                conn = m.Connection(
                    m.CLIENT,
                    framing="messages",
                    era=era,  # type: ignore[arg-type]
                    capabilities=capabilities,
                    info={"name": "ws-test", "version": "1.0"},
                    **conn_options,
                )
                peer = WsPeer(stream, ws, conn)
                peer.subprotocol = event.subprotocol  # type: ignore[attr-defined]
                return peer
            if isinstance(event, RejectConnection):
                status = event.status_code
            elif isinstance(event, RejectData):
                body += event.data
                if event.body_finished:
                    await stream.aclose()
                    return Refused(status, body)
        if not data:
            await stream.aclose()
            return Refused(status, body)
