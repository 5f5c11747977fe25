"""A 2025-only Streamable HTTP server: the official ``mcp`` 2.3.0 server in session mode.

Usage: ``python tests/support/peer_mcp_legacy_http.py`` binds 127.0.0.1 on a
free port, prints ``PORT <n>`` and serves ``/mcp`` until killed.

It serves the tools of ``peer_mcp_server.py`` plus two that ask the client with
real server-to-client requests (``ctx.elicit``, ``ctx.session.create_message``)
on the POST's SSE stream, one of which closes that stream mid-call
(``ctx.close_sse_stream``) so the client must resume it with ``Last-Event-ID``
(an in-memory event store gives every event an id); ``slow`` outlasts any
client's patience.  The SDK serves 2025 and
2026-07-28 on one endpoint; a middleware makes it 2025-only the way a 2025 SDK
is: a request naming a version it does not know gets HTTP 400 with a JSON-RPC
-32600 "Unsupported protocol version".  Every request's method, path and
JSON-RPC method are appended to the file named by ``MRTR_WIRE_LOG`` (if set),
one JSON line each, so tests can assert what was on the wire.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
from typing import Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import SamplingMessage, TextContent
from peer_mcp_server import Person, server
from pydantic import BaseModel

LEGACY = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
WIRE_LOG = os.environ.get("MRTR_WIRE_LOG")


class Color(BaseModel):
    color: str


@server.tool()
async def ask_then_sample(ctx: Context) -> str:
    """2025-style input: an elicitation, then a sampling request, as server requests."""
    who = await ctx.elicit("Who are you?", Person)
    name = who.data.name if who.action == "accept" and who.data else who.action
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Greet {name}"))
    said = await ctx.session.create_message([message], max_tokens=20)
    text = said.content.text if isinstance(said.content, TextContent) else "?"
    return f"name={name} llm={text}"


@server.tool()
async def ask_across_a_break(ctx: Context) -> str:
    """Closes its own SSE stream after asking, so the answer travels on a resumed stream."""
    first = await ctx.elicit("Who are you?", Person)
    await ctx.close_sse_stream()
    second = await ctx.elicit("Favourite colour?", Color)
    name = first.data.name if first.data else first.action
    color = second.data.color if second.data else second.action
    return f"name={name} color={color}"


@server.tool()
async def slow() -> str:
    """Takes a minute: the client gives up first and cancels."""
    await anyio.sleep(60)
    return "too late"


class MemoryEvents(EventStore):
    """Every event kept, in order (a test server: a handful of events)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = f"ev-{next(self.ids)}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        ids = [event[0] for event in self.events]
        if last_event_id not in ids:
            return None
        stream = self.events[ids.index(last_event_id)][1]
        for event_id, stream_id, message in self.events[ids.index(last_event_id) + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def legacy_only(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        version = headers.get("mcp-protocol-version")
        body = b""
        if scope["method"] == "POST":
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
        if WIRE_LOG:
            try:
                rpc = json.loads(body).get("method") if body else None
            except ValueError:
                rpc = None
            line = {
                "http": scope["method"],
                "rpc": rpc,
                "session": headers.get("mcp-session-id"),
                "version": version,
                "last_event_id": headers.get("last-event-id"),
            }
            with open(WIRE_LOG, "a") as log:
                log.write(json.dumps(line) + "\n")
        if version is not None and version not in LEGACY:
            error = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": f"Unsupported protocol version: {version}"},
            }
            payload = json.dumps(error).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": payload})
            return
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


def main() -> None:
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    app = server.streamable_http_app(event_store=MemoryEvents(), retry_interval=100)
    config = uvicorn.Config(legacy_only(app), log_level="warning", lifespan="on")

    async def serve() -> None:
        await uvicorn.Server(config).serve(sockets=[listener])

    anyio.run(serve)


if __name__ == "__main__":
    main()
