"""Many multi-round flows at once against the Streamable HTTP server, a real subprocess.

The server is ``support.load_server`` (``support.load_app``) on 127.0.0.1 with
a small ``max_connections``; the clients are the project's
``open_http_client``, each with its own pool of keep-alive connections, more
of them together than the server takes.  Each flow is ``relay`` (three legs,
whose questions name the flow: see ``support.load_flows``).  What must hold:
every flow ends with its exact result; a connection past the bound is refused
clearly (HTTP 503, then closed) and the client-side retry gets every flow
through; the server's memory does not grow with the number of flows served.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import trio
from mrtr_transports.client.http import open_http_client
from support.load_flows import FlowDriver
from support.load_servers import http_server
from support.raw_http import RawHttp, hold_busy, post_when_served, tool_call

#: Generous: a loaded two-core machine runs these in a few seconds.
BUDGET = 90


async def test_two_hundred_concurrent_three_leg_flows_all_end_with_their_result() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=17, idle_timeout=2.0) as server:
            driver = FlowDriver()
            async with AsyncExitStack() as stack:
                # era="modern": no probe, no connection until the first call.  retry_attempts=1:
                # the clients hide no refusal, each reaches the driver, which starts the flow
                # over (test_load_http_retries.py has the clients retry instead).
                clients = [
                    await stack.enter_async_context(
                        open_http_client(
                            server.url,
                            answer=driver.answer,
                            max_connections=8,
                            era="modern",
                            retry_attempts=1,
                        )
                    )
                    for _ in range(2)
                ]
                # 16 of the 17 slots busy for a while: the first legs meet a full server
                # (then the clients' 16 connections fit: no churn once the holders are done).
                holders = await hold_busy(server.port, 16, seconds=1.5)
                report = await driver.run(clients, range(200), concurrency=200)
                for holder in holders:
                    final = (await holder.body()).final()
                    assert final["result"]["content"][0]["text"] == "paused"
                    await holder.aclose()
    assert report.lost == 0, report.summary()
    assert report.completed == 200
    assert len(report.rounds) == 3 * 200  # every flow took its three legs
    # The bound was hit, and every refusal was retried to the end.  The client sees a
    # refusal as a 503 ("busy": it reads it even when its send broke), a kept-alive
    # connection closed under it as a broken one ("disconnect"); a leg re-issued after
    # its connection broke may find its state spent ("replayed").
    assert report.refusals > 0, report.summary()
    assert set(report.refusal_kinds) <= {"busy", "disconnect", "replayed"}, report.summary()
    assert report.retries == report.refusals


async def test_a_connection_past_the_bound_is_refused_clearly_and_served_once_one_frees() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=4) as server:
            held = await hold_busy(server.port, 4, seconds=60)  # every slot busy
            refused = await RawHttp.connect(server.port)
            said = await refused.read_to_end()  # answered at once, before any request
            head, _, body = said.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 ")
            assert b"connection: close" in head.lower()
            assert b"too many connections" in body
            await refused.aclose()
            await held.pop().aclose()  # its request is cancelled, its slot freed
            # The next connection is served (the server frees the slot as soon as it sees
            # the close: a client refused meanwhile tries again).
            reply = await post_when_served(server.port, tool_call("relay", {"n": 9}))
            assert reply.status == 200
            assert reply.json()["result"]["resultType"] == "input_required"
            for conn in held:
                await conn.aclose()


async def test_server_memory_stays_bounded_across_ten_times_more_flows() -> None:
    with trio.fail_after(BUDGET):
        async with http_server() as server:
            driver = FlowDriver()
            async with open_http_client(server.url, answer=driver.answer) as client:
                warm = await driver.run([client], range(50), concurrency=5)
                before = server.rss_kib()
                many = await driver.run([client], range(50, 550), concurrency=5)
                after = server.rss_kib()
    assert warm.lost == 0 and many.lost == 0, many.summary()
    # A leak of a few KiB per flow would show; allocator noise stays well under this.
    assert after - before < 8 * 1024, f"VmRSS grew {after - before} KiB over 500 flows"
