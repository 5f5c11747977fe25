"""A refused client that goes on sending its request still reads its 503: lingering close.

The server refuses a connection before reading its request (every slot busy
at accept; evicted while its body was arriving) and writes the 503 at once.
Were it to close then, the kernel would reset the connection as the client's
bytes keep coming, and the client would meet "connection reset" on its next
write, the 503 maybe lost with it.  Instead the server ends its side and
reads and drops what the client still sends (a request's worth, two seconds
at most): a client that writes its whole request before reading anything,
as simple clients do, finishes writing and then finds the 503.
"""

from __future__ import annotations

import json

import trio
from support.load_servers import http_server
from support.raw_http import RawHttp, hold_busy, tool_call

BUDGET = 60
#: More than the socket buffers hold, less than the server reads while lingering.
BODY_SIZE = 3 << 20


def big_request(conn: RawHttp) -> tuple[bytes, bytes]:
    """The head (with one piece of body) and the rest of a ``BODY_SIZE`` POST on ``conn``."""
    data = conn.request_bytes(tool_call("relay", {"n": 1, "pad": "x" * BODY_SIZE}))
    split = data.index(b"\r\n\r\n") + 4 + 65536
    return data[:split], data[split:]


def refusal(said: bytes) -> tuple[str, dict[str, str], dict[str, object]]:
    head, _, body = said.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return lines[0], headers, json.loads(body)


async def test_a_client_refused_at_accept_finishes_sending_then_reads_the_503() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=1) as server:
            held = await hold_busy(server.port, 1, seconds=60)
            refused = await RawHttp.connect(server.port)
            first, rest = big_request(refused)
            await refused.stream.send_all(first + rest)  # no reset: the server drains it
            status, headers, body = refusal(await refused.read_to_end())
            await refused.aclose()
            for conn in held:
                await conn.aclose()
    assert status.startswith("HTTP/1.1 503 ") and headers["retry-after"] == "1"
    assert "too many connections" in str(body), body


async def test_a_client_evicted_mid_body_finishes_sending_then_reads_the_503() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=1, body_timeout=30.0) as server:
            evicted = await RawHttp.connect(server.port)
            first, rest = big_request(evicted)
            await evicted.stream.send_all(first)  # its head and a first piece of body
            await trio.sleep(1.0)  # (read by the server: the body is arriving)
            newcomer = await RawHttp.connect(server.port)  # takes the only slot
            await evicted.stream.send_all(rest)  # no reset: the server drains it
            status, headers, body = refusal(await evicted.read_to_end())
            await evicted.aclose()
            await newcomer.aclose()
    assert status.startswith("HTTP/1.1 503 ") and "retry-after" in headers
    assert "evicted" in str(body), body
