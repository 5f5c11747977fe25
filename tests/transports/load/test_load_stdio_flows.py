"""Many multi-round flows at once over one stdio connection to a real server subprocess.

The server is the serve entry (``mrtr serve --stdio``)
with ``support.load_app``; the client is ``open_stdio_client``.  Every call
shares the one pair of pipes, so what must hold is that concurrent calls never
mix: each ``relay`` flow (three legs, questions that name the flow) ends with
its exact result, and the server's memory does not grow with the number of
flows served.
"""

from __future__ import annotations

import trio
from mrtr_transports.client.stdio import open_stdio_client
from support.load_flows import FlowDriver
from support.load_servers import ROOT, STDIO_SERVER, rss_kib, server_env

BUDGET = 90


async def test_two_hundred_concurrent_flows_over_one_stdio_connection_lose_nothing() -> None:
    driver = FlowDriver()
    with trio.fail_after(BUDGET):
        async with open_stdio_client(
            STDIO_SERVER, env=server_env(), cwd=ROOT, answer=driver.answer
        ) as client:
            report = await driver.run([client], range(200), concurrency=200)
    assert report.lost == 0, report.summary()
    assert report.completed == 200
    assert len(report.rounds) == 3 * 200
    assert report.refusals == 0  # one connection: nothing to refuse at this count


async def test_server_memory_stays_bounded_across_ten_times_more_flows() -> None:
    driver = FlowDriver()
    with trio.fail_after(BUDGET):
        async with open_stdio_client(
            STDIO_SERVER, env=server_env(), cwd=ROOT, answer=driver.answer
        ) as client:
            assert client.link.process is not None
            pid = client.link.process.pid
            warm = await driver.run([client], range(100), concurrency=1)
            before = rss_kib(pid)
            many = await driver.run([client], range(100, 1100), concurrency=1)
            after = rss_kib(pid)
    assert warm.lost == 0 and many.lost == 0, many.summary()
    assert after - before < 8 * 1024, f"VmRSS grew {after - before} KiB over 1000 flows"
