"""A connection refused past ``max_connections`` is told when to come back: ``Retry-After``.

Every slot of a server with ``max_connections=2`` is busy (each runs
``pause``, seen started); the next connection is answered at once, before it
sends anything: 503, ``Retry-After`` a whole number of seconds, a JSON-RPC
error body (no id: the request was never read) whose message says why, and
the connection closed.  A client that comes back after the holders are gone
is served.
"""

from __future__ import annotations

import json

import trio
from support.load_servers import http_server
from support.raw_http import RawHttp, hold_busy, post_when_served, tool_call

BUDGET = 60


async def test_a_refusal_past_max_connections_says_when_to_retry() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=2) as server:
            held = await hold_busy(server.port, 2, seconds=60)
            refused = await RawHttp.connect(server.port)
            said = await refused.read_to_end()
            await refused.aclose()
            head, _, body = said.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in lines[1:])
            assert lines[0].startswith("HTTP/1.1 503 ")
            assert headers["retry-after"].isdigit() and int(headers["retry-after"]) >= 1
            assert headers["content-type"] == "application/json"
            assert headers["connection"] == "close"
            error = json.loads(body)
            assert error.get("id") is None
            assert "too many connections" in error["error"]["message"]
            for conn in held:
                await conn.aclose()
            reply = await post_when_served(server.port, tool_call("relay", {"n": 1}))
            assert reply.status == 200
