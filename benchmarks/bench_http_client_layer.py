"""The HTTP client's connection layer, measured: today's h11 pool or httpcore.

Issue 21 asks whether ``HttpLink`` should keep its own HTTP/1.1 layer (h11 over an
anyio stream: ``client/http_connection.py`` and the pool in ``client/http.py``) or
sit on httpcore (httpcore2's ``AsyncConnectionPool``, anyio backend), which brings
proxies, TLS settings and HTTP/2.  The session, stream and retry rules stay ours
either way; only the layer that writes a POST and reads its response changes.

The model: one ``mrtr serve --http`` subprocess serving ``bench_mrtr_app.py``; in
this process, on trio and on asyncio, sequential two-leg ``greet`` flows (POST
``tools/call``, read the ``input_required`` JSON, POST the retry with
``inputResponses`` and the echoed ``requestState``, read ``Hello Ada``) over one
kept-alive connection, by:

* ``h11``: our layer as ``HttpLink`` drives it (``HttpConnection``: head, body and
  end in one write, events read until ``EndOfMessage``, the connection back in the
  pool for the next cycle);
* ``httpcore``: ``AsyncConnectionPool.request`` with the same headers and body;
* ``client``: the whole client (``open_http_client`` + ``call_tool("greet")``), for
  scale: what the rest of the client costs above its connection layer.

Per layer and loop: flows/s at the median of ``--repeats`` batches, the spread, and
microseconds per flow.

Measured 2026-11-26 (2 CPUs shared, load 10: spreads of 10-30 %), 500 flows x 5:
trio h11 156/s, httpcore 93/s, whole client 77/s; asyncio h11 127/s, httpcore 96/s,
whole client 139/s.  The server dominates a flow; httpcore is no faster on either
loop.  Lines: the h11 layer is about 150 (``HttpConnection`` 58, ``_connection`` 34,
``client/tcp.py`` 50, the pool's bookkeeping in ``http.py`` about 13); httpcore would
replace most of them with a pool and ``request``/``stream`` calls (about 40), but adds
a dependency and moves the points the retry rules hook into (a stale kept-alive
connection before any response byte, a refusal before processing) behind its
exceptions.  Decision: keep the h11 layer behind ``HttpConnection``; that seam is
where httpcore would go if proxies or HTTP/2 are wanted.  Run: ``nice -n 10 .venv/bin/python
benchmarks/bench_http_client_layer.py [--quick]``.  Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import h11

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import Stats, machine  # noqa: E402
from bench_transports import http_server  # noqa: E402

PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench-layer", "version": "1.0"},
}
ANSWER = {"name": {"action": "accept", "content": {"name": "Ada"}}}
Post = Callable[[bytes], Awaitable[dict[str, Any]]]


def headers(authority: str, body: bytes) -> list[tuple[str, str]]:
    return [
        ("Host", authority),
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        ("MCP-Protocol-Version", PROTOCOL),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "greet"),
    ]


async def flow(post: Post, request_id: int) -> None:
    params: dict[str, Any] = {"name": "greet", "arguments": {}, "_meta": META}
    first = await post(_body(request_id, params))
    result = first["result"]
    params = {**params, "inputResponses": ANSWER, "requestState": result["requestState"]}
    second = await post(_body(request_id + 1, params))
    if second["result"]["content"][0]["text"] != "Hello Ada":
        raise RuntimeError(f"unexpected answer: {second}")


def _body(request_id: int, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message, separators=(",", ":")).encode()


async def h11_layer(url: str) -> tuple[Post, Callable[[], Awaitable[None]]]:
    from mrtr_transports.client.http_connection import HttpConnection
    from mrtr_transports.client.tcp import connect

    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    conn = HttpConnection(await connect(parts.hostname, parts.port))

    async def post(body: bytes) -> dict[str, Any]:
        request = h11.Request(method="POST", target=parts.path, headers=headers(parts.netloc, body))
        await conn.send(request, h11.Data(data=body), h11.EndOfMessage())
        data = b""
        while not isinstance(event := await conn.next_event(), h11.EndOfMessage):
            if isinstance(event, h11.Data):
                data += event.data
        conn.h11.start_next_cycle()
        return dict(json.loads(data))

    return post, conn.aclose


async def httpcore_layer(url: str) -> tuple[Post, Callable[[], Awaitable[None]]]:
    import httpcore2

    pool = httpcore2.AsyncConnectionPool(max_connections=16)
    authority = urlsplit(url).netloc

    async def post(body: bytes) -> dict[str, Any]:
        response = await pool.request("POST", url, headers=headers(authority, body), content=body)
        return dict(json.loads(response.content))

    return post, pool.aclose


async def measure_layer(make: Any, url: str, n: int, repeats: int) -> Stats:
    post, close = await make(url)
    try:
        for i in range(max(n // 10, 1)):  # warm-up
            await flow(post, 2 * i)
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            for i in range(n):
                await flow(post, 2 * i)
            seconds.append((time.perf_counter() - start) / n)
        return Stats(tuple(seconds))
    finally:
        await close()


async def measure_client(url: str, n: int, repeats: int) -> Stats:
    from mrtr_transports.client.http import open_http_client

    import mrtr_core as m

    async def answer(key: str, request: m.wire.InputRequest) -> Any:
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})

    async with open_http_client(url, era="modern", answer=answer) as client:
        for _ in range(max(n // 10, 1)):
            await client.call_tool("greet")
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(n):
                await client.call_tool("greet")
            seconds.append((time.perf_counter() - start) / n)
        return Stats(tuple(seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=500, help="flows per batch")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100 flows, 3 batches")
    args = parser.parse_args()
    n, repeats = (100, 3) if args.quick else (args.flows, args.repeats)
    print(machine(("mrtr", "anyio", "trio", "h11", "httpcore2")))
    print(f"{n} sequential two-leg flows per batch, {repeats} batches, median")
    print(f"{'loop':8} {'layer':9} {'flows/s':>9} {'us/flow':>9} {'spread':>11}")
    with http_server("mrtr") as url:
        for backend in ("trio", "asyncio"):
            for name, make in (("h11", h11_layer), ("httpcore", httpcore_layer)):
                stats = anyio.run(measure_layer, make, url, n, repeats, backend=backend)
                print(
                    f"{backend:8} {name:9} {stats.rate:9.0f} {stats.us():9.0f} {stats.spread:>11}"
                )
            stats = anyio.run(measure_client, url, n, repeats, backend=backend)
            print(
                f"{backend:8} {'client':9} {stats.rate:9.0f} {stats.us():9.0f} {stats.spread:>11}"
            )


if __name__ == "__main__":
    main()
