"""A tiny scriptable HTTP/1.1 server (trio + h11) for the HTTP client tests.

It listens on 127.0.0.1 (port 0), records every request it reads
(``server.seen``: method, target, headers, decoded JSON body) and answers each
with whatever the test's handler returns: a JSON body, an SSE stream (which
can break mid-way, or stay open until the client closes it), a bare status.
It knows nothing of MCP beyond the helpers below; tests script the protocol.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import h11
import trio


@dataclass
class Seen:
    """One request the server read."""

    method: str
    target: str
    headers: dict[str, str]  # lower-case names
    body: Any

    @property
    def rpc_method(self) -> str | None:
        return self.body.get("method") if isinstance(self.body, dict) else None

    @property
    def params(self) -> dict[str, Any]:
        params = self.body.get("params") if isinstance(self.body, dict) else None
        return params if isinstance(params, dict) else {}


@dataclass
class Reply:
    """What to answer: ``status``, ``headers``, then ``chunks`` of the body.

    ``break_after`` closes the connection after that many chunks, without
    ending the body (a broken stream).  ``hold`` keeps the response open after
    the chunks, sending keep-alive comments, until the client goes away.
    ``close_after`` closes the connection once the response is complete,
    without saying so (a keep-alive connection the server dropped).
    """

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    break_after: int | None = None
    hold: bool = False
    delay: float = 0.0  # seconds before the response starts
    close_after: bool = False


def json_reply(message: Any, status: int = 200) -> Reply:
    body = json.dumps(message).encode()
    return Reply(status, [("Content-Type", "application/json")], [body])


def sse_reply(messages: list[Any], *, break_after: int | None = None, hold: bool = False) -> Reply:
    chunks = [f"data: {json.dumps(message)}\n\n".encode() for message in messages]
    headers = [("Content-Type", "text/event-stream"), ("X-Accel-Buffering", "no")]
    return Reply(200, headers, chunks, break_after=break_after, hold=hold)


def result(request: Seen, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request.body["id"], "result": value}


def error(request: Seen | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "error": {"code": code, "message": message}}
    if data is not None:
        out["error"]["data"] = data
    if request is not None:
        out["id"] = request.body["id"]
    return out


DISCOVER = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "peer-http", "version": "1"},
}

Handler = Callable[[Seen], Awaitable[Reply]]


class PeerHttpServer:
    """Serve ``handler`` on 127.0.0.1; ``await nursery.start(server.run)`` returns the URL."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[Seen] = []
        self.connections = 0  # TCP connections accepted
        self.abandoned: list[Seen] = []  # held streams the client closed
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.url)
        await trio.serve_listeners(self._serve, listeners)

    async def _serve(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._next(stream, conn)
                if request is None:
                    return
                body = bytearray()
                while True:
                    event = await self._next(stream, conn)
                    if event is None:
                        return
                    if isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
                headers = {k.decode().lower(): v.decode() for k, v in request.headers}
                try:
                    decoded = json.loads(body) if body else None
                except ValueError:
                    decoded = body.decode("utf-8", "replace")
                seen = Seen(request.method.decode(), request.target.decode(), headers, decoded)
                self.seen.append(seen)
                reply = await self.handler(seen)
                if not await self._answer(stream, conn, seen, reply):
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return
        finally:
            await trio.aclose_forcefully(stream)

    async def _next(self, stream: trio.SocketStream, conn: h11.Connection) -> Any:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
                continue
            if isinstance(event, h11.ConnectionClosed):
                return None
            return event

    async def _answer(
        self, stream: trio.SocketStream, conn: h11.Connection, seen: Seen, reply: Reply
    ) -> bool:
        """Write ``reply``; False when the connection must not be used again."""
        await trio.sleep(reply.delay)
        headers = list(reply.headers)
        if not reply.hold and reply.break_after is None:
            size = sum(len(chunk) for chunk in reply.chunks)
            headers.append(("Content-Length", str(size)))
        await stream.send_all(conn.send(h11.Response(status_code=reply.status, headers=headers)))
        for index, chunk in enumerate(reply.chunks):
            if reply.break_after is not None and index >= reply.break_after:
                return False  # drop the connection mid-body
            await stream.send_all(conn.send(h11.Data(data=chunk)))
        if reply.break_after is not None:
            return False
        if reply.hold:
            try:
                while True:
                    await trio.sleep(0.02)
                    await stream.send_all(conn.send(h11.Data(data=b":\n\n")))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.abandoned.append(seen)
                return False
        await stream.send_all(conn.send(h11.EndOfMessage()))
        return not reply.close_after
