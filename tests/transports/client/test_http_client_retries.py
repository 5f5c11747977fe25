"""The HTTP client sends again what the server provably did not process, and only that.

A refusal qualifies when it says so: HTTP 503, ``Retry-After`` in seconds and
a JSON-RPC error of code -32000 (our server's ``SERVER_BUSY``, written only
before a request reaches the app).  The retry is the same message, sent
again (the trace records it once), after ``Retry-After``, or at once on a
connection of ours the server already holds a place for; ``retry_attempts``
bounds the attempts, ``retry_max_delay`` the wait.  The server here is
tests/support/peer_http_server.py on a real socket, scripted per test.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from mrtr_transports.client.client import Client, TraceRecord
from mrtr_transports.client.errors import CallError, TransportError
from mrtr_transports.client.http import HttpLink, open_http_client
from support.peer_http_server import PeerHttpServer, Reply, Seen, error, json_reply, result

import mrtr_core as m

SERVER_BUSY = -32000
BUDGET = 20


def refusal(retry_after: str | None, code: int = SERVER_BUSY, status: int = 503) -> Reply:
    """What our server writes when it refuses a request before reading it (no id)."""
    body = json.dumps(error(None, code, "too many connections: retry later")).encode()
    headers = [("Content-Type", "application/json"), ("Connection", "close")]
    if retry_after is not None:
        headers.append(("Retry-After", retry_after))
    return Reply(status, headers, [body])


def answered(seen: Seen) -> Reply:
    return json_reply(result(seen, {"tools": []}))


async def run(
    script: Callable[[Seen, int], Awaitable[Reply] | Reply],
    body: Callable[[Client, PeerHttpServer], Awaitable[None]],
    **options: Any,
) -> PeerHttpServer:
    """A server answering each ``tools/list`` by ``script(seen, how many came before)``."""
    count = 0

    async def handler(seen: Seen) -> Reply:
        nonlocal count
        count += 1
        reply = script(seen, count - 1)
        return reply if isinstance(reply, Reply) else await reply

    server = PeerHttpServer(handler)
    with trio.fail_after(BUDGET):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(server.run)
            async with open_http_client(url, era="modern", **options) as client:
                await body(client, server)
            nursery.cancel_scope.cancel()
    return server


async def test_a_busy_refusal_is_sent_again_until_it_is_served() -> None:
    def script(seen: Seen, before: int) -> Reply:
        return refusal("0") if before < 2 else answered(seen)

    async def body(client: Client, server: PeerHttpServer) -> None:
        assert await client.request("tools/list") == {"tools": []}

    records: list[TraceRecord] = []
    server = await run(script, body, tracer=records.append)
    # The same message three times (same id: the server never processed it), traced once.
    assert [seen.body for seen in server.seen] == [server.seen[0].body] * 3
    assert server.connections == 3  # each refusal closed its connection
    assert sum(r.dir == "send" for r in records) == 1


async def test_a_refusal_past_the_attempts_is_a_transport_error_with_status_503() -> None:
    async def body(client: Client, server: PeerHttpServer) -> None:
        with pytest.raises(TransportError) as caught:
            await client.request("tools/list")
        assert (caught.value.kind, caught.value.status) == ("http", 503)
        assert "3 attempts" in str(caught.value) and "too many connections" in str(caught.value)

    server = await run(lambda seen, before: refusal("0"), body)
    assert len(server.seen) == 3


async def test_retry_attempts_1_sends_once() -> None:
    async def body(client: Client, server: PeerHttpServer) -> None:
        with pytest.raises(TransportError) as caught:
            await client.request("tools/list")
        assert caught.value.status == 503 and "1 attempt" in str(caught.value)

    server = await run(lambda seen, before: refusal("0"), body, retry_attempts=1)
    assert len(server.seen) == 1


async def test_retry_after_is_waited_for_and_a_longer_one_than_allowed_is_not() -> None:
    times: list[float] = []

    def script(seen: Seen, before: int) -> Reply:
        times.append(trio.current_time())
        return refusal("1") if before == 0 else answered(seen)

    async def body(client: Client, server: PeerHttpServer) -> None:
        assert await client.request("tools/list") == {"tools": []}

    await run(script, body)
    assert times[1] - times[0] >= 1.0  # the server said one second: not sooner

    async def refused(client: Client, server: PeerHttpServer) -> None:
        with pytest.raises(TransportError) as caught:
            await client.request("tools/list")
        assert caught.value.status == 503 and "Retry-After: 60 s" in str(caught.value)

    server = await run(lambda seen, before: refusal("60"), refused, retry_max_delay=5.0)
    assert len(server.seen) == 1  # a minute is more than this client hides


@pytest.mark.parametrize(
    "reply",
    [
        refusal(None),  # no Retry-After
        refusal("Wed, 21 Oct 2026 07:28:00 GMT"),  # a date: not a refusal of ours
        refusal("0", code=m.ErrorCode.INTERNAL_ERROR),  # another error: it may have run
        refusal("0", status=500),
    ],
    ids=["no-retry-after", "retry-after-date", "not-server-busy", "not-503"],
)
async def test_other_errors_are_not_sent_again(reply: Reply) -> None:
    async def body(client: Client, server: PeerHttpServer) -> None:
        with pytest.raises((CallError, TransportError)):
            await client.request("tools/list")

    server = await run(lambda seen, before: reply, body)
    assert len(server.seen) == 1


async def test_a_refused_request_takes_a_connection_of_ours_as_soon_as_one_is_free() -> None:
    """Retry-After is about new connections: one the server already holds for us may
    carry the retry at once, instead of waiting out the delay."""

    async def script(seen: Seen, before: int) -> Reply:
        if before == 0:  # the first request holds the first connection for a while
            reply = answered(seen)
            reply.delay = 0.5
            return reply
        if before == 1:  # the second, on a new connection, is refused for 60 s
            return refusal("60")
        return answered(seen)

    async def body(client: Client, server: PeerHttpServer) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.request, "tools/list")
            while not server.seen:
                await trio.sleep(0.01)
            with trio.fail_after(BUDGET / 2):  # far less than the 60 s
                assert await client.request("tools/list") == {"tools": []}

    server = await run(script, body, retry_max_delay=60.0)
    assert len(server.seen) == 3 and server.connections == 2  # the retry reused the first


async def test_the_retry_options_are_checked() -> None:
    with pytest.raises(ValueError, match="retry_attempts"):
        HttpLink("http://127.0.0.1:1/mcp", retry_attempts=0)
    with pytest.raises(ValueError, match="retry_max_delay"):
        HttpLink("http://127.0.0.1:1/mcp", retry_max_delay=-1.0)
