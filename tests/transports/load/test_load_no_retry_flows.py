"""No flow is lost under load, even by a client that never retries (issue 22, item 10).

Many concurrent three-leg ``relay`` flows go over more kept-alive client
connections than the server has connection slots, through a raw h11 client
that reuses a connection whenever the server did not say ``Connection: close``
and retries nothing.  What must hold: every request the server read gets a
response, and every connection it drops is one it told the client not to
reuse.  So each flow either ends with its exact result or meets a clear
refusal (503 with ``Retry-After``); none meets a reset, or a reused
connection closed before any status line.

One race no HTTP/1.1 server can close: a connection kept alive and idle is
evicted (slots full) just as its client writes a new request on it.  The host
promises a kept-alive connection its slot for ``KEPT_ALIVE_GRACE`` (2 s) after
its response; a client that reuses one later than that, on a full server, may
meet a close before any status line (RFC 9112, 9.3.1: clients retry such a
request; ours does).  So a loss counts against the server only on a connection
reused within the grace of its previous request being *sent* (the server cannot
have seen it idle that long); later ones are tallied apart, and only happen when
the machine is so loaded that the client's own tasks stall for seconds.

(The attack that found it: 500 flows over 128 client connections for 64
slots lost 1, 0, 1 and 7 flows in four runs; scaled down here to 8 slots, on
the server's two loops.  Before the fix, a run here lost 36 flows of 120 on
trio and 37 on asyncio, each to a reused connection closed under its request.)
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs
import h11
import pytest
import trio
from mrtr_transports.host.slots import KEPT_ALIVE_GRACE
from support.load_flows import expected, result_text
from support.load_servers import http_server
from support.raw_http import ClosedEarly, RawHttp, Reply, echo, retry_of, tool_call

BUDGET = 60
SLOTS = 8
CLIENT_CONNECTIONS = 16
FLOWS = 120
RUNS = 3


@attrs.define
class Tally:
    completed: int = 0
    #: Clear refusals (503 with Retry-After), by leg.
    refused: Counter[str] = attrs.field(factory=Counter)
    #: Everything else: what each lost flow met.
    lost: Counter[str] = attrs.field(factory=Counter)
    #: Closed under a request on a connection reused past the grace (see the docstring).
    past_grace: int = 0


class NoRetryClient:
    """Up to ``size`` kept-alive connections, each reused while the server allows."""

    def __init__(self, port: int, size: int) -> None:
        self.port = port
        self.idle: list[RawHttp] = []
        self.limiter = trio.CapacityLimiter(size)
        #: When each open connection's last request was sent (by ``id``).
        self.sent_at: dict[int, float] = {}

    async def post(self, message: dict[str, Any]) -> Reply | str:
        """The reply, or what went wrong instead (a lost request)."""
        async with self.limiter:
            reused = bool(self.idle)
            conn = self.idle.pop() if reused else await RawHttp.connect(self.port)
            now = trio.current_time()
            past_grace = reused and now - self.sent_at[id(conn)] >= KEPT_ALIVE_GRACE
            self.sent_at[id(conn)] = now
            try:
                reply = await conn.post(message)
            except (trio.BrokenResourceError, h11.RemoteProtocolError, ClosedEarly) as exc:
                await self._close(conn)
                if past_grace:
                    return PAST_GRACE
                return f"{type(exc).__name__} on a {'reused' if reused else 'new'} connection"
            if reply.headers.get("connection", "").lower() == "close":
                await self._close(conn)
            else:
                self.idle.append(conn)
            return reply

    async def _close(self, conn: RawHttp) -> None:
        self.sent_at.pop(id(conn), None)
        await conn.aclose()

    async def aclose(self) -> None:
        for conn in self.idle:
            await self._close(conn)


PAST_GRACE = "closed under a request on a connection reused past the kept-alive grace"


async def one_flow(client: NoRetryClient, n: int, tally: Tally) -> None:
    first = tool_call("relay", {"n": n}, rid=f"{n}-1")
    message: dict[str, Any] = first
    for leg in (1, 2, 3):
        reply = await client.post(message)
        if reply == PAST_GRACE:
            tally.past_grace += 1
            return
        if isinstance(reply, str):
            tally.lost[f"leg {leg}: {reply}"] += 1
            return
        if reply.status == 503 and reply.headers.get("retry-after", "").isdigit():
            tally.refused[f"leg {leg}"] += 1
            return
        if reply.status != 200:
            tally.lost[f"leg {leg}: HTTP {reply.status} {reply.body[:80]!r}"] += 1
            return
        result = reply.final()["result"]
        if leg == 3:
            if result_text(result) == expected(n):
                tally.completed += 1
            else:
                tally.lost[f"wrong result {result_text(result)!r}"] += 1
            return
        (key,) = result["inputRequests"]
        answers = {key: echo(f"flow {n} leg {leg}")}
        message = retry_of(first, answers, result.get("requestState"), rid=f"{n}-{leg + 1}")
    raise AssertionError("unreachable")


async def run_flows(port: int) -> Tally:
    tally = Tally()
    client = NoRetryClient(port, CLIENT_CONNECTIONS)
    try:
        async with trio.open_nursery() as nursery:
            for n in range(FLOWS):
                nursery.start_soon(one_flow, client, n, tally)
    finally:
        await client.aclose()
    return tally


@pytest.mark.parametrize("loop", ["trio", "asyncio"])
async def test_flows_over_more_connections_than_slots_are_never_lost_without_retries(
    loop: str,
) -> None:
    tallies = []
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=SLOTS, loop=loop) as server:
            for _ in range(RUNS):
                tallies.append(await run_flows(server.port))
    print(tallies)  # (shown by pytest -s: the completed and refused flows of each run)
    # None lost.  (Under the whole suite's load one in 360 used to be: a kept-alive
    # connection evicted in the step its next request's last bytes came was answered
    # without ``Connection: close`` and then closed under the client's next request.)
    assert not any(t.lost for t in tallies), tallies
    for tally in tallies:
        accounted = tally.completed + sum(tally.refused.values()) + tally.past_grace
        assert accounted + sum(tally.lost.values()) == FLOWS, tallies
    # Most flows get through: a refusal is the exception, not the rule.
    assert sum(t.completed for t in tallies) >= RUNS * FLOWS // 2, tallies
