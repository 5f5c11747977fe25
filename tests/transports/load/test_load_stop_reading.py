"""An HTTP client that stops reading its SSE response: the server gives up on it, alone.

The client asks for ``flood`` (progress notifications of 64 KiB, until
cancelled), so the response becomes an SSE stream, and never reads a byte of
it.  Once the socket buffers are full the server's write waits; after
``write_timeout`` it takes the client as gone: the handler is cancelled, the
connection closed and its slot freed.  Meanwhile other clients are served,
and the server's memory stays bounded (a write that waits buffers nothing
more).
"""

from __future__ import annotations

from typing import Any

import trio
from support.load_servers import RssSampler, http_server
from support.raw_http import RawHttp, hold_served, post_when_served, tool_call

BUDGET = 60


async def stats(port: int) -> dict[str, Any]:
    reply = await post_when_served(port, tool_call("stats"))
    figures: dict[str, Any] = reply.json()["result"]["structuredContent"]
    return figures


async def test_a_client_that_never_reads_its_stream_is_dropped_and_blocks_nobody() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=2, write_timeout=1.0) as server:
            sampler = RssSampler(server.pid)
            baseline = sampler.sample()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sampler.run)
                stalled = await RawHttp.connect(server.port, receive_buffer=4096)
                await stalled.send(tool_call("flood", {"size": 65536}, progress_token="p"))
                # The other slot serves other clients while the flood waits on its reader.
                while (now := await stats(server.port))["started"] == 0:
                    await trio.sleep(0.02)
                assert now["running"] == 1
                first = await post_when_served(server.port, tool_call("relay", {"n": 3}))
                assert first.json()["result"]["resultType"] == "input_required"
                # After write_timeout the server gives the stalled client up.
                while (now := await stats(server.port))["running"] != 0:
                    await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
            assert now["cancelled"] == 1 and now["finished"] == 0
            await stalled.read_to_end()  # the server closed it (what was buffered, then EOF)
            await stalled.aclose()
            # Both slots are free again: two clients at once are served.
            for conn in await hold_served(server.port, 2):
                await conn.aclose()
    # A write that waits holds one message, not a growing backlog.
    assert sampler.peak_kib - baseline < 32 * 1024, (baseline, sampler.peak_kib)
