"""The HTTP server answers every request and cannot be starved (real sockets on 127.0.0.1).

HEAD, an empty POST that closes, repeated headers, sockets that trickle a head
a byte at a time, and a client that opens more ``subscriptions/listen``
streams than its share: each is sent for real, and the server must answer
everyone else promptly, with a clear refusal where it refuses.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import h11
import pytest
import trio
from mrtr_transports.apps.mcp_app import SUBSCRIPTION_ID, McpApp
from mrtr_transports.asgi.policy import AccessPolicy, Headers
from mrtr_transports.asgi.pools import ListenPool, ListenRefusal
from mrtr_transports.client.http import open_http_client
from mrtr_transports.host.refusals import SERVER_BUSY
from mrtr_transports.host.slots import ConnectionSlots
from mrtr_transports.server.http import HttpServer
from test_http_server import (
    ACCEPT_BOTH,
    ENDPOINT,
    HttpPeer,
    Reply,
    Served,
    rpc,
    serving,
    tool_call,
)

import mrtr_core as m

CITY = m.wire.ElicitResult(action="accept", content={"city": "Oslo"})
TONE = m.wire.CreateMessageResult(
    role="assistant", content={"type": "text", "text": "cold but bright"}, model="test-llm"
)
TRIP_CAPABILITIES = {"elicitation": {}, "sampling": {}}


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    return CITY if key == "city" else TONE


@pytest.fixture
def server_log() -> Iterator[list[logging.LogRecord]]:
    """Every record the HTTP server logs meanwhile."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("mrtr")  # every logger of the tree (docs/transports.md)
    handler = Keep(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def tracebacks(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.exc_info or r.levelno >= logging.ERROR]


async def read_response(stream: trio.SocketStream, *, head_request: bool = False) -> Reply:
    """One response, parsed by an h11 client that knows what was asked."""
    client = h11.Connection(h11.CLIENT)
    method = "HEAD" if head_request else "POST"
    client.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    response = None
    body = b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert response is not None
            headers = {k.decode(): v.decode() for k, v in response.headers}
            return Reply(response.status_code, headers, body)
        else:
            raise AssertionError(event)


async def raw_exchange(served: Served, data: bytes, *, head_request: bool = False) -> Reply:
    async with await trio.open_tcp_stream(served.host, served.port) as stream:
        await stream.send_all(data)
        return await read_response(stream, head_request=head_request)


# --- 1. HEAD ---


@ENDPOINT
async def test_head_gets_the_headers_of_a_get_and_no_body(
    server_log: list[logging.LogRecord], kind: str
) -> None:
    with trio.fail_after(10):
        async with serving(kind=kind) as served:
            for target, status in (("/mcp", 405), ("/mcp?x=1", 405), ("/other", 404), ("/", 404)):
                async with served.connect() as peer:
                    get = await peer.post(method="GET", target=target)
                    head = await peer.post(method="HEAD", target=target)
                    assert (get.status, head.status) == (status, status)
                    assert head.body == b"" and get.body
                    # The headers of the GET (RFC 9110, 9.3.2); its message names HEAD.
                    assert head.headers.keys() == get.headers.keys()
                    assert int(head.headers["content-length"]) > 0
                    if status == 405:
                        assert head.headers["allow"] == "GET, POST, DELETE"
                    # Nothing more was written: the next request on the connection parses.
                    assert (await peer.post(tool_call("echo", {"text": "next"}))).status == 200
            # Refused before the path (Origin) or after (Accept): still no body.
            async with served.connect() as peer:
                evil = [("Origin", "http://evil.example")]
                assert (await peer.post(method="HEAD", extra=evil)).status == 403
                assert (await peer.post(method="HEAD", accept="text/html")).status == 405
                assert (await peer.post(tool_call("echo"))).status == 200
            # Written by hand and read to the end: the head ends the answer.
            stream = await trio.open_tcp_stream(served.host, served.port)
            async with stream:
                await stream.send_all(b"HEAD /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n")
                await stream.send_eof()
                received = b""
                while chunk := await stream.receive_some(65536):
                    received += chunk
                assert received.startswith(b"HTTP/1.1 405 ") and received.endswith(b"\r\n\r\n")
                assert received.count(b"HTTP/1.1") == 1
    assert not tracebacks(server_log)


# --- 2. An empty POST that ends the connection ---


@pytest.mark.parametrize(
    "head",
    [
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n",
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 0\r\n",
        b"POST /mcp HTTP/1.0\r\nHost: localhost\r\n",
        b"POST /mcp HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n",
        b"POST /mcp HTTP/1.0\r\n",
    ],
)
@ENDPOINT
async def test_an_empty_post_that_closes_gets_its_400_at_once(head: bytes, kind: str) -> None:
    async with serving(kind=kind) as served:  # idle_timeout and body_timeout are 60 s
        started = trio.current_time()
        with trio.fail_after(5):
            request = head + b"Content-Type: application/json\r\nAccept: " + ACCEPT_BOTH.encode()
            reply = await raw_exchange(served, request + b"\r\n\r\n")
        assert trio.current_time() - started < 5
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["code"] == m.ErrorCode.PARSE_ERROR and "empty body" in error["message"]


# --- 3. Repeated headers ---


async def test_repeated_origin_host_and_content_type_are_refused_in_any_order() -> None:
    good = json.dumps(tool_call("echo", {"text": "hi"})).encode()
    mirrored = b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n"

    def request(fields: bytes) -> bytes:
        head = b"POST /mcp HTTP/1.1\r\nAccept: application/json\r\n" + mirrored + fields
        return head + b"Content-Length: %d\r\n\r\n" % len(good) + good

    ctype = b"Content-Type: application/json\r\n"
    host = b"Host: localhost\r\n"
    with trio.fail_after(10):
        async with serving() as served:
            assert (await raw_exchange(served, request(host + ctype))).status == 200
            for first, second in (
                (b"http://localhost", b"http://evil.example"),
                (b"http://evil.example", b"http://localhost"),
                (b"http://localhost", b"http://localhost"),
            ):
                origins = b"Origin: " + first + b"\r\norigin: " + second + b"\r\n"
                reply = await raw_exchange(served, request(host + ctype + origins))
                assert reply.status == 403
                assert "more than one Origin" in reply.json()["error"]["message"]
            for types in (
                b"Content-Type: text/plain\r\n",
                b"content-type: application/json\r\n",
            ):
                reply = await raw_exchange(served, request(host + ctype + types))
                assert reply.status == 400
                assert "more than one Content-Type" in reply.json()["error"]["message"]
            for hosts in (b"Host: evil.example\r\n", b"HOST: localhost\r\n"):
                reply = await raw_exchange(served, request(host + hosts + ctype))
                assert reply.status == 400
                assert "multiple Host" in reply.json()["error"]["message"]


# --- 4. Trickling sockets ---


class Trickler:
    """An attacker's socket: a request head a byte at a time; reconnects when dropped."""

    HEAD = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" * 50

    def __init__(self, served: Served, interval: float, reconnect_after: float) -> None:
        self.served = served
        self.interval = interval
        self.reconnect_after = reconnect_after
        self.answers: list[int] = []
        self.connected = trio.Event()

    async def run(self) -> None:
        while True:
            stream = await trio.open_tcp_stream(self.served.host, self.served.port)
            async with stream:
                self.connected.set()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._drip, stream, nursery.cancel_scope)
                    received = b""
                    try:
                        while chunk := await stream.receive_some(65536):
                            received += chunk
                    except trio.BrokenResourceError:
                        pass
                    nursery.cancel_scope.cancel()
                if received:
                    self.answers.append(int(received.split(b" ")[1]))
            await trio.sleep(self.reconnect_after)

    async def _drip(self, stream: trio.SocketStream, scope: trio.CancelScope) -> None:
        try:
            for byte in self.HEAD:
                await stream.send_all(bytes([byte]))
                await trio.sleep(self.interval)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            scope.cancel()


async def test_trickling_sockets_cannot_starve_a_real_client(
    server_log: list[logging.LogRecord],
) -> None:
    slots = 16
    with trio.fail_after(30):
        # head_timeout is long on purpose: eviction, not the deadline, is what saves us here.
        async with (
            serving(max_connections=slots, head_timeout=60.0) as served,
            trio.open_nursery() as attack,
        ):
            tricklers = [Trickler(served, 0.3, reconnect_after=0.2) for _ in range(slots)]
            for trickler in tricklers:
                attack.start_soon(trickler.run)
                await trickler.connected.wait()
            while len(served.server.slots) < slots:
                await trio.sleep(0.01)
            url = f"http://{served.host}:{served.port}/mcp"
            with trio.fail_after(10):
                async with open_http_client(
                    url, answer=answer, capabilities=TRIP_CAPABILITIES
                ) as client:
                    for _ in range(3):  # multi-round, three times over
                        result = await client.call_tool("trip")
                        text = result["content"][0]["text"]
                        assert text == "Trip to Oslo: cold but bright"
            attack.cancel_scope.cancel()
    evicted = [status for t in tricklers for status in t.answers]
    assert evicted and set(evicted) == {503}  # told to come back, not left hanging
    assert len(served.server.slots) == 0
    assert not tracebacks(server_log)


async def test_a_head_must_arrive_within_head_timeout_however_it_trickles() -> None:
    with trio.fail_after(10):
        async with serving(head_timeout=0.5) as served:
            trickler = Trickler(served, 0.05, reconnect_after=3600)  # a byte every 50 ms
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trickler.run)
                started = trio.current_time()
                while not trickler.answers:
                    await trio.sleep(0.01)
                elapsed = trio.current_time() - started
                nursery.cancel_scope.cancel()
            # Each byte would reset an idle timer: the head (3500 bytes) would take minutes.
            assert trickler.answers == [408]
            assert elapsed < 5


async def test_a_body_must_arrive_within_body_timeout() -> None:
    with trio.fail_after(10):
        async with serving(body_timeout=0.5) as served:
            stream = await trio.open_tcp_stream(served.host, served.port)
            async with stream:
                await stream.send_all(
                    b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 1000\r\n\r\n{"
                )
                with contextlib.suppress(trio.BrokenResourceError):  # answered, and closed
                    for _ in range(60):  # 3 s of a byte every 50 ms
                        await stream.send_all(b" ")
                        await trio.sleep(0.05)
                reply = await read_response(stream)
            assert reply.status == 408 and "body" in reply.json()["error"]["message"]


async def test_a_request_in_flight_is_never_evicted() -> None:
    with trio.fail_after(10):
        async with (
            serving(max_connections=2) as served,
            served.connect() as first,
            served.connect() as second,
        ):
            await first.send_request(tool_call("slow", {"seconds": 0.5}))
            await second.send_request(tool_call("slow", {"seconds": 0.5}))
            while served.app.counts["started"] < 2:
                await trio.sleep(0.01)
            for _ in range(5):  # newcomers find every slot busy
                async with served.connect() as third:
                    await third.send_request(tool_call("echo"))
                    refused = await third.reply()
                    assert refused.status == 503 and refused.headers["retry-after"] == "1"
                    assert refused.json()["error"]["code"] == SERVER_BUSY
            assert (await first.reply()).json()["result"]["content"][0]["text"] == "slow done"
            assert (await second.reply()).status == 200


# --- 5. Listen streams ---


def listen_app() -> McpApp:
    app = McpApp("listen-test", "1.0")
    app.add_tool(lambda ctx: "pong", name="ping_tool")
    return app


LISTEN = {"notifications": {"toolsListChanged": True}}


@asynccontextmanager
async def connect_from(served: Served, address: str) -> AsyncIterator[HttpPeer]:
    """A connection from another loopback address: another client."""
    stream = await trio.open_tcp_stream(served.host, served.port, local_address=address)
    async with stream:
        yield HttpPeer(stream, f"{served.host}:{served.port}")


async def open_listen(peer: HttpPeer, rid: Any) -> h11.Response:
    """Send a listen request; its response head (200 once acknowledged, else a refusal)."""
    await peer.send_request(rpc("subscriptions/listen", LISTEN, rid=rid))
    return await peer.head()


async def acknowledged(peer: HttpPeer, rid: Any) -> None:
    head = await open_listen(peer, rid)
    assert head.status_code == 200
    event = await peer.next_event()
    assert isinstance(event, h11.Data)
    assert b"notifications/subscriptions/acknowledged" in event.data


async def test_a_client_past_its_listen_share_is_refused_and_others_are_not() -> None:
    with trio.fail_after(15):
        options = {"max_listen_streams_per_client": 2, "max_listen_streams": 3}
        # (Three slots: `three` stays kept alive below, and a young kept-alive connection
        # keeps its slot from newcomers, host/slots.py; two more clients come.)
        async with serving(listen_app(), max_connections=3, **options) as served:
            server: HttpServer = served.server
            async with AsyncExitStack() as held:
                for rid in (1, 2):  # one after another: each leaves the connection slots
                    await acknowledged(await held.enter_async_context(served.connect()), rid)
                three = await held.enter_async_context(served.connect())
                # Listen streams are not counted in the connection slots (2 here).
                assert (len(server.listens), len(server.slots)) == (2, 1)  # three alone
                await three.send_request(rpc("subscriptions/listen", LISTEN, rid=3))
                refused = await three.reply()
                assert refused.status == 429
                retry_after = int(refused.headers["retry-after"])
                assert 1 <= retry_after <= 600  # when its oldest stream reaches its lifetime
                body = refused.json()
                assert body["id"] == 3 and body["error"]["code"] == SERVER_BUSY
                assert "max_listen_streams_per_client=2" in body["error"]["message"]
                assert body["error"]["data"] == {"retryAfterSeconds": retry_after}
                # The refused connection is still good for ordinary requests.
                assert (await three.post(tool_call("ping_tool"))).status == 200

                # Another client calls tools and opens its own stream...
                async with connect_from(served, "127.0.0.2") as other:
                    reply = await other.post(tool_call("ping_tool"))
                    assert reply.json()["result"]["content"][0]["text"] == "pong"
                async with (
                    connect_from(served, "127.0.0.2") as other,
                    connect_from(served, "127.0.0.3") as third_client,
                ):
                    await acknowledged(other, 7)
                    # ... until the pool is full: then a 503 for everyone.
                    assert (await open_listen(third_client, 8)).status_code == 503
                    assert (
                        server.listens.held_by("peer:127.0.0.2") == 1
                    )  # (client_key: the peer, no auth)
                # A stream closed by its client gives its place back.
                while len(server.listens) > 2:
                    await trio.sleep(0.01)
                async with connect_from(served, "127.0.0.3") as third_client:
                    await acknowledged(third_client, 9)


async def test_a_listen_stream_ends_gracefully_at_its_lifetime() -> None:
    with trio.fail_after(10):
        app = listen_app()
        async with serving(app, listen_lifetime=0.5) as served, served.connect() as peer:
            await acknowledged(peer, "sub-1")
            assert app.subscription_count == 1
            body = b""
            while not isinstance(event := await peer.next_event(), h11.EndOfMessage):
                assert isinstance(event, h11.Data), event
                body += event.data
            final = Reply(200, {"content-type": "text/event-stream"}, body).events()[-1]
            # The graceful end of the spec: a result naming the subscription, then the close.
            assert final["id"] == "sub-1"
            assert final["result"]["resultType"] == "complete"
            assert final["result"]["_meta"][SUBSCRIPTION_ID] == "sub-1"
            assert await peer.closed_by_server()
            assert app.subscription_count == 0 and len(served.server.listens) == 0
            async with served.connect() as again:  # the client reconnects
                await acknowledged(again, 2)


# --- The pure parts ---


class Conn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.evicted = False

    def evict(self) -> None:
        self.evicted = True


def test_slots_evict_the_longest_waiter_and_never_a_busy_one() -> None:
    slots = ConnectionSlots(2)
    a, b, c, d = Conn("a"), Conn("b"), Conn("c"), Conn("d")
    assert slots.admit(a) and slots.admit(b)
    slots.busy(a)
    assert slots.admit(c)  # b waited longest (a is busy)
    assert (a.evicted, b.evicted) == (False, True) and b not in slots
    slots.busy(b)  # evicted meanwhile: stays out
    assert len(slots) == 2 and b not in slots
    slots.busy(c)
    assert not slots.admit(d)  # every slot busy: refused
    slots.waiting(a)  # answered: a waits again, as the youngest
    slots.waiting(d)  # never admitted: nothing changes
    assert slots.admit(d) and a.evicted and not c.evicted
    slots.release(c)
    slots.release(c)
    assert len(slots) == 1 and d in slots


def test_listen_pool_shares_and_retry_after() -> None:
    pool = ListenPool(max_streams=3, per_client=2, lifetime=100.0)
    first = pool.admit("a", now=0.0)
    second = pool.admit("a", now=10.0)
    assert not isinstance(first, ListenRefusal) and not isinstance(second, ListenRefusal)
    refusal = pool.admit("a", now=30.0)
    assert isinstance(refusal, ListenRefusal)
    assert (refusal.status, refusal.retry_after) == (429, 70)  # first ends at 100
    assert not isinstance(pool.admit("b", now=40.0), ListenRefusal)
    full = pool.admit("c", now=99.5)
    assert isinstance(full, ListenRefusal) and (full.status, full.retry_after) == (503, 1)
    pool.release(first)
    pool.release(first)  # twice: no harm
    assert (len(pool), pool.held_by("a")) == (2, 1)
    assert not isinstance(pool.admit("c", now=100.0), ListenRefusal)


def test_the_client_is_the_peer_or_who_a_trusted_proxy_names() -> None:
    direct = AccessPolicy(None, None, ())
    forwarded = Headers([(b"X-Forwarded-For", b"203.0.113.9")])
    assert direct.client_of(forwarded, "198.51.100.1") == "198.51.100.1"  # not a proxy
    assert direct.client_of(Headers([]), None) == "unknown"
    proxied = AccessPolicy(None, None, ["10.0.0.0/8"])
    assert proxied.client_of(forwarded, "10.0.0.2") == "203.0.113.9"
    chain = Headers(
        [(b"X-Forwarded-For", b"1.1.1.1, 203.0.113.9"), (b"X-Forwarded-For", b"10.0.0.7")]
    )
    assert proxied.client_of(chain, "10.0.0.2") == "203.0.113.9"  # the spoofable left is ignored
    assert proxied.client_of(Headers([]), "10.0.0.2") == "10.0.0.2"
    broken = Headers([(b"X-Forwarded-For", b"203.0.113.9,,10.0.0.7")])
    assert proxied.client_of(broken, "10.0.0.2") == "10.0.0.7"  # believe no further than a gap


def test_bounds_must_be_positive() -> None:
    app = listen_app()
    for option in ("max_listen_streams", "max_listen_streams_per_client"):
        with pytest.raises(ValueError, match=option):
            HttpServer(app, **{option: 0})
    for option in ("head_timeout", "body_timeout", "listen_lifetime", "idle_timeout"):
        with pytest.raises(ValueError, match=option):
            HttpServer(app, **{option: 0})
