"""The peer side of ``bench_transports.py``: the official ``mcp`` 2.3.0 ``MCPServer``.

``python benchmarks/bench_mcp_peer.py stdio`` serves on stdin/stdout;
``python benchmarks/bench_mcp_peer.py http`` binds 127.0.0.1 on a free port,
prints ``PORT <n>`` on stdout and serves Streamable HTTP at ``/mcp`` under
uvicorn until killed (stateless, JSON responses: the same shape of answer as
our server, and the SDK's cheapest HTTP mode).

The same two tools as ``bench_mrtr_app.py``: ``greet`` returns an
``InputRequiredResult`` asking one form elicitation under ``name`` (the SDK
seals its ``requestState``), and greets the name on the retry; ``plain`` is one
leg with no input.
"""

from __future__ import annotations

import socket
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

server = MCPServer("bench-mcp", version="1.0")

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool(description="Asks for a name (one form elicitation), then greets it")
async def greet(ctx: Context) -> CallToolResult | InputRequiredResult:
    reply = (ctx.input_responses or {}).get("name")
    if not isinstance(reply, ElicitResult) or not reply.content:
        ask = ElicitRequest(
            params=ElicitRequestFormParams(
                message="What is your name?", requested_schema=NAME_SCHEMA
            )
        )
        return InputRequiredResult(input_requests={"name": ask}, request_state="asked")
    return CallToolResult(content=[TextContent(type="text", text=f"Hello {reply.content['name']}")])


@server.tool(description="One leg, no input")
async def plain() -> str:
    return "done"


def serve_http() -> None:
    import anyio
    import uvicorn

    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say so, as
    # when uvicorn binds by itself.  With proto 0, Nagle's algorithm meets delayed ACKs
    # and every POST waits ~40 ms.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)  # bench_http opens up to 1,000 connections at once
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    # Kept-alive connections wait between bench_http's batches while the other servers
    # take their turn: uvicorn's 5 s idle close would cut them under a flow.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=600)

    async def main() -> None:
        await uvicorn.Server(config).serve(sockets=[listener])

    anyio.run(main)


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        serve_http()
    elif sys.argv[1:] == ["stdio"]:
        server.run("stdio")
    else:
        sys.exit("usage: bench_mcp_peer.py stdio|http")
