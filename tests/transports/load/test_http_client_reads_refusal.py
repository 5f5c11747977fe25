"""The HTTP client reads the server's 503 even when sending its request failed.

Waits for a fix that no branch is making yet, in the HTTP client
(``HttpLink._post``): past ``max_connections`` the server writes its 503 as
soon as it accepts the connection, then closes it without reading.  A client
still sending its request then fails with "Broken pipe" and reports a broken
connection (``TransportError(kind="disconnect")``, no status), never reading
the 503 waiting in its socket: the refusal stops being clear.  It happens to
every request large enough not to fit the socket buffers, and to every
request of a client slower than the server (the load tests see all their
refusals this way when run under coverage).  The fix: after a failed send,
read the response the server may already have sent before calling the
connection broken (and, on the server, close refused connections lingeringly
so the reset does not discard the 503).
"""

from __future__ import annotations

import pytest
import trio
from mrtr_transports.client.errors import TransportError
from mrtr_transports.client.http import open_http_client
from support.load_servers import http_server
from support.raw_http import hold_busy

BUDGET = 60


async def test_a_refused_request_surfaces_as_a_503_even_if_its_send_broke() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=1) as server:
            held = await hold_busy(server.port, 1, seconds=60)
            async with open_http_client(server.url, era="modern") as client:
                big = {"name": "relay", "arguments": {"n": 1, "pad": "x" * (8 << 20)}}
                with pytest.raises(TransportError) as caught:
                    await client.request("tools/call", big)
            for conn in held:
                await conn.aclose()
    assert caught.value.status == 503, caught.value
