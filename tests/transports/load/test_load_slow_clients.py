"""Slow and idle clients of the Streamable HTTP server (a real subprocess) block nobody.

Three kinds of slow client, three of each, all at once: one that connects
and says nothing, one that sends its request a byte at a time, one that reads
a large response a few KiB at a time.  While every one of them is still in
the middle of what it does, another client's whole three-leg flow completes.
Then the bounds: with a short ``idle_timeout`` the server itself closes the
idle connection and the trickling one before the trickle is over.
"""

from __future__ import annotations

import trio
from mrtr_transports.client.http import open_http_client
from support.load_flows import FlowDriver, expected, result_text
from support.load_servers import http_server
from support.raw_http import RawHttp, tool_call

BUDGET = 60
Started = trio.TaskStatus[None]
#: The slow reader's response: far more than the socket buffers hold.
BLOB = 4 * 1024 * 1024


class Slowpokes:
    """The slow clients, and how far each got."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stop = trio.Event()
        self.idle_closed_by_server = 0
        self.trickled: list[int] = []  # bytes sent by each trickler when it stopped
        self.trickle_sizes: list[int] = []
        self.read: list[int] = []  # bytes taken by each slow reader when it stopped
        self.running = 0

    async def idle(self, task_status: Started = trio.TASK_STATUS_IGNORED) -> None:
        conn = await RawHttp.connect(self.port)
        self.running += 1
        task_status.started()
        try:
            with trio.move_on_after(BUDGET):
                async with trio.open_nursery() as nursery:

                    async def watch() -> None:
                        await conn.read_to_end()
                        self.idle_closed_by_server += 1
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(watch)
                    await self.stop.wait()
                    nursery.cancel_scope.cancel()
        finally:
            self.running -= 1
            await conn.aclose()

    async def trickle(self, task_status: Started = trio.TASK_STATUS_IGNORED) -> None:
        conn = await RawHttp.connect(self.port)
        data = conn.request_bytes(tool_call("relay", {"n": 1}))
        self.trickle_sizes.append(len(data))
        self.running += 1
        task_status.started()
        try:
            sent = await conn.trickle(data, 0.1, self.stop)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            sent = -1  # the server closed it under us
        finally:
            self.running -= 1
            await conn.aclose()
        self.trickled.append(sent)

    async def slow_read(self, task_status: Started = trio.TASK_STATUS_IGNORED) -> None:
        conn = await RawHttp.connect(self.port, receive_buffer=4096)
        await conn.send(tool_call("blob", {"size": BLOB}))
        self.running += 1
        task_status.started()
        taken = 0
        try:
            while not self.stop.is_set():
                data = await conn.stream.receive_some(4096)
                if not data:
                    break
                taken += len(data)
                await trio.sleep(0.05)
        finally:
            self.running -= 1
            await conn.aclose()
        self.read.append(taken)


async def test_idle_trickling_and_slow_reading_clients_do_not_block_another_call() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(idle_timeout=30, write_timeout=30) as server:
            slow = Slowpokes(server.port)
            driver = FlowDriver()
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    await nursery.start(slow.idle)
                    await nursery.start(slow.trickle)
                    await nursery.start(slow.slow_read)
                await trio.sleep(0.5)  # the slow ones are well under way
                async with open_http_client(server.url, answer=driver.answer) as client:
                    result = await client.call_tool("relay", {"n": 42})
                # The call is done while every slow client is still at it.
                still_running = slow.running
                slow.stop.set()
    assert result_text(result) == expected(42)
    assert still_running == 9
    assert slow.idle_closed_by_server == 0
    trickles = zip(slow.trickled, slow.trickle_sizes, strict=True)
    assert all(0 < sent < size for sent, size in trickles), (slow.trickled, slow.trickle_sizes)
    assert all(0 < taken < BLOB for taken in slow.read), slow.read


async def test_the_server_closes_idle_and_trickling_connections_at_its_idle_timeout() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(idle_timeout=1.0, head_timeout=1.0) as server:
            slow = Slowpokes(server.port)
            async with trio.open_nursery() as nursery:
                await nursery.start(slow.idle)
                await nursery.start(slow.trickle)  # would take 40 s at a byte per 100 ms
            # Both ended by themselves: the server closed them, not our stop.
            assert not slow.stop.is_set()
            async with open_http_client(server.url, answer=FlowDriver().answer) as client:
                result = await client.call_tool("relay", {"n": 7})
    assert slow.idle_closed_by_server == 1
    assert slow.trickled == [-1]  # cut off by the server before its request was whole
    assert result_text(result) == expected(7)
