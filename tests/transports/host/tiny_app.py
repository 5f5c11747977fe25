"""A tiny ASGI 3 app for the host tests: no framework, no MCP, anyio only (runs on both loops).

Routes: ``/echo`` (the body back, as JSON), ``/slow?seconds=S`` (reads the body,
waits, answers), ``/sleep`` (waits until the client goes: counts the
disconnects it sees), ``/stream?n=N`` (N chunks of a body without length,
``more_body``: an SSE-like stream; ``&close=1``: its head says ``connection: close``,
as a long-lived stream's does), ``/big?n=N`` (N bytes at once),
``/early`` (answers 413 without reading the body), ``/crash`` (raises),
``/silent`` (returns without a response), ``/state`` (what the lifespan put in
the scope's state).  ``counts`` says what ran.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import anyio

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class TinyApp:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lifespan: list[str] = []

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        assert scope["type"] == "http"
        path = scope["path"]
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        self.counts["started"] += 1
        if path == "/echo":
            body = await read_body(receive)
            if body is None:
                return
            await send_json(send, 200, {"echo": body.decode(), "method": scope["method"]})
        elif path == "/slow":
            await read_body(receive)
            await anyio.sleep(float(query.get("seconds", "0.2")))
            await send_json(send, 200, {"done": "slow"})
        elif path == "/sleep":
            await read_body(receive)
            message = await receive()  # the host hands a disconnect when the client goes
            assert message["type"] == "http.disconnect"
            self.counts["disconnected"] += 1
        elif path == "/stream":
            await read_body(receive)
            headers = [(b"connection", b"close")] if query.get("close") else []
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            for i in range(int(query.get("n", "3"))):
                event = f"data: {i}\n\n".encode()
                await send({"type": "http.response.body", "body": event, "more_body": True})
                await anyio.sleep(0.01)
            await send({"type": "http.response.body", "body": b""})
        elif path == "/big":
            await read_body(receive)
            size = int(query["n"])
            headers = [(b"content-length", str(size).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"x" * size})
        elif path == "/early":
            await send_json(send, 413, {"error": "too large, unread"})
        elif path == "/crash":
            raise RuntimeError("the tiny app crashed (on purpose)")
        elif path == "/silent":
            return
        elif path == "/state":
            await send_json(send, 200, {"state": dict(scope["state"])})
        else:
            await send_json(send, 404, {"error": path})
        self.counts["answered"] += 1

    async def _lifespan(
        self, scope: MutableMapping[str, Any], receive: Receive, send: Send
    ) -> None:
        while True:
            message = await receive()
            self.lifespan.append(message["type"])
            if message["type"] == "lifespan.startup":
                scope["state"]["greeting"] = "hello"
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


async def read_body(receive: Receive) -> bytes | None:
    """The whole body, or ``None`` when the client went (or the host refused it)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return body


async def send_json(send: Send, status: int, value: Any) -> None:
    body = json.dumps(value).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
