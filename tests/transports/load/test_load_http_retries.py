"""More client connections than server slots: the client's retries carry every flow through.

The server (``support.load_server``, a real subprocess) has
``max_connections=8``; two clients of eight keep-alive connections each run
100 ``relay`` flows (three legs each) at once.  The server keeps evicting
idle kept-alive connections for newcomers and refusing newcomers while every
slot runs a request; the client sends again every request the server
provably did not process (a stale kept-alive connection, a 503
``SERVER_BUSY``), so no flow sees a refusal: none is started over, none is
lost, each ends with its exact result.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack

import pytest
import trio
from mrtr_transports.client.http import open_http_client
from support.load_flows import FlowDriver
from support.load_servers import http_server

BUDGET = 90


async def test_flows_over_more_connections_than_slots_are_never_started_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mrtr.client.http")
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=8, idle_timeout=2.0) as server:
            driver = FlowDriver(max_attempts=1)  # a refusal would lose its flow
            async with AsyncExitStack() as stack:
                clients = [
                    await stack.enter_async_context(
                        open_http_client(
                            server.url, answer=driver.answer, max_connections=8, era="modern"
                        )
                    )
                    for _ in range(2)
                ]
                report = await driver.run(clients, range(100), concurrency=100)
    assert report.lost == 0 and report.refusals == 0, report.summary()
    assert report.completed == 100 and len(report.rounds) == 3 * 100
    # The bound was hit (16 connections for 8 slots) and the client hid it: it resent.
    resent = [
        r for r in caplog.records if "refused" in r.getMessage() or "closed under" in r.getMessage()
    ]
    assert resent, "no request was refused or met a closed connection: no contention"
