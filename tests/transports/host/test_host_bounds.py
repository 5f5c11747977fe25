"""The host's connection bounds, on real sockets on 127.0.0.1, on trio and asyncio.

The assertions of ``HttpServer``'s connection tests (``tests/transports/server/
test_http_server.py``, ``test_http_faults.py``, ``test_http_malformed.py``), made
against the host serving a tiny ASGI app: the head size (431), the body size
(413), the deadlines for the head and the body (408) and the idle one (a close),
connection slots (a request in flight is never evicted; tricklers are, with a 503;
when every slot is busy a newcomer gets 503 with ``Retry-After``), keep-alive, the
graceful drain, and malformed requests answered without a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os

import anyio
import h11
import pytest
from anyio.abc import SocketAttribute
from host_peer import (
    STREAM_GONE,
    Trickler,
    body_of,
    hosting,
    server_log,
    status_of,
    tracebacks,
)
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.asgi import McpAsgi
from mrtr_transports.host import AsgiHost, HostBounds, split_options
from mrtr_transports.host.bounds import MAX_FIELD_SIZE, MAX_HEADER_FIELDS
from mrtr_transports.host.refusals import SERVER_BUSY
from mrtr_transports.host.slots import KEPT_ALIVE_GRACE, ConnectionSlots
from mrtr_transports.server.http import HttpServer
from mrtr_transports.server.ws import WsServer
from tiny_app import TinyApp

pytestmark = pytest.mark.anyio


def test_the_bounds_are_those_of_the_trio_servers_and_must_be_positive() -> None:
    defaults = HttpServer.__init__.__kwdefaults__ or {}
    bounds = HostBounds()
    for name in (
        "max_connections",
        "max_header_size",
        "max_body_size",
        "idle_timeout",
        "head_timeout",
        "body_timeout",
        "write_timeout",
    ):
        assert getattr(bounds, name) == defaults[name], name
        with pytest.raises(ValueError, match=name):
            AsgiHost(TinyApp(), **{name: 0})
    ws_defaults = WsServer.__init__.__kwdefaults__ or {}
    for name in ("max_message_size", "ping_interval", "ping_timeout"):
        assert getattr(bounds, name) == ws_defaults[name], name
        with pytest.raises(ValueError, match=name):
            AsgiHost(TinyApp(), **{name: 0})


def test_the_serve_options_split_between_the_host_and_the_endpoint() -> None:
    options = {
        "max_connections": 8,
        "head_timeout": 2.0,
        "max_body_size": 1000,
        "write_timeout": 5.0,
        "max_listen_streams": 3,
        "allowed_hosts": ["example.com"],
    }
    host, app = split_options(options)
    assert host == {
        "max_connections": 8,
        "head_timeout": 2.0,
        "max_body_size": 1000,
        "write_timeout": 5.0,
    }
    assert app == {
        "max_body_size": 1000,
        "write_timeout": 5.0,
        "max_listen_streams": 3,
        "allowed_hosts": ["example.com"],
    }
    endpoint = McpAsgi(McpApp("split", "1.0"), **app)  # each side takes its own
    assert AsgiHost(endpoint, **host).bounds.max_connections == 8


async def test_heads_and_bodies_are_bounded() -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp(), max_body_size=1000, max_header_size=4096) as hosted:
            assert (await hosted.request("/echo", b"x" * 2000)).status == 413
            chunked = b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            chunked += b"800\r\n" + b"y" * 0x800 + b"\r\n0\r\n\r\n"
            reply = await hosted.raw(chunked)  # the size shows only as it comes
            assert status_of(reply) == 413
            assert "larger than 1000" in json.loads(body_of(reply))["error"]["message"]
            huge = await hosted.request("/echo", b"{}", extra=[("X-Filler", "y" * 8000)])
            assert huge.status == 431
            assert (await hosted.request("/echo", b"fits")).status == 200


@pytest.mark.parametrize("size", [20 * 1024, 70 * 1024])
async def test_the_probed_header_sizes_get_431_under_the_defaults(size: int) -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp()) as hosted:
            head = b"GET /echo HTTP/1.1\r\nHost: h\r\nX-Filler: " + b"y" * size + b"\r\n\r\n"
            reply = await hosted.raw(head)
            assert status_of(reply) == 431
            assert json.loads(body_of(reply))["error"]["message"]


async def test_too_many_fields_or_one_too_long_get_431_within_the_head_size() -> None:
    # Heads under max_header_size (16 KiB): what is refused is their shape (bounds.py).
    with anyio.fail_after(5):
        async with hosting(TinyApp()) as hosted:
            fillers = "".join(f"X-F{i}: v\r\n" for i in range(MAX_HEADER_FIELDS - 2))
            for extra, status in (("", 200), ("X-Last: v\r\n", 431)):  # 256 fields, 257
                head = f"GET /echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\n{fillers}{extra}\r\n"
                reply = await hosted.raw(head.encode())
                assert status_of(reply) == status, reply[:200]
            assert "fields" in json.loads(body_of(reply))["error"]["message"]
            long_field = b"GET /echo HTTP/1.1\r\nHost: h\r\nX-Long: " + b"y" * MAX_FIELD_SIZE
            reply = await hosted.raw(long_field + b"\r\n\r\n")
            assert status_of(reply) == 431
            assert "longer than" in json.loads(body_of(reply))["error"]["message"]


async def test_a_head_must_arrive_within_head_timeout_however_it_trickles() -> None:
    with anyio.fail_after(10):
        async with hosting(TinyApp(), head_timeout=0.5) as hosted:
            trickler = Trickler(hosted, 0.05, reconnect_after=3600)  # a byte every 50 ms
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(trickler.run)
                started = anyio.current_time()
                while not trickler.answers:
                    await anyio.sleep(0.01)
                elapsed = anyio.current_time() - started
                tasks.cancel_scope.cancel()
            # Each byte would reset an idle timer: the head (3500 bytes) would take minutes.
            assert trickler.answers == [408]
            assert elapsed < 5


async def test_a_body_must_arrive_within_body_timeout() -> None:
    with anyio.fail_after(10):
        async with hosting(TinyApp(), body_timeout=0.5) as hosted:
            stream = await anyio.connect_tcp(hosted.address, hosted.port)
            received = b""

            async def read() -> None:  # as a real client does: read while it sends
                nonlocal received
                with contextlib.suppress(*STREAM_GONE):
                    while True:
                        received += await stream.receive()

            async with stream, anyio.create_task_group() as tasks:
                tasks.start_soon(read)
                await stream.send(
                    b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n{"
                )
                with contextlib.suppress(*STREAM_GONE):  # answered, and closed
                    for _ in range(60):  # 3 s of a byte every 50 ms
                        await stream.send(b" ")
                        await anyio.sleep(0.05)
            assert status_of(received) == 408
            assert "body" in json.loads(body_of(received))["error"]["message"]


async def test_a_silent_connection_is_closed_after_idle_timeout() -> None:
    with anyio.fail_after(10):
        async with hosting(TinyApp(), idle_timeout=0.3) as hosted, hosted.connect() as peer:
            assert (await peer.request("/echo", b"one")).status == 200
            started = anyio.current_time()
            assert await peer.closed_by_server()  # no answer: nothing was asked
            assert 0.2 < anyio.current_time() - started < 3


async def test_trickling_sockets_cannot_starve_a_real_client() -> None:
    slots = 8
    with server_log() as records, anyio.fail_after(30):
        # head_timeout is long on purpose: eviction, not the deadline, is what saves us here.
        async with (
            hosting(TinyApp(), max_connections=slots, head_timeout=60.0) as hosted,
            anyio.create_task_group() as attack,
        ):
            tricklers = [Trickler(hosted, 0.3, reconnect_after=0.2) for _ in range(slots)]
            for trickler in tricklers:
                attack.start_soon(trickler.run)
                await trickler.connected.wait()
            while len(hosted.host.slots) < slots:
                await anyio.sleep(0.01)
            with anyio.fail_after(10):
                for round_ in range(3):
                    async with hosted.connect() as peer:
                        reply = await peer.request("/echo", f"round {round_}".encode())
                        assert reply.json()["echo"] == f"round {round_}"
            while not any(t.answers for t in tricklers):
                await anyio.sleep(0.01)
            attack.cancel_scope.cancel()
    evicted = [status for t in tricklers for status in t.answers]
    assert evicted and set(evicted) == {503}  # told to come back, not left hanging
    assert not tracebacks(records)


async def test_a_request_in_flight_is_never_evicted() -> None:
    app = TinyApp()
    with anyio.fail_after(10):
        async with (
            hosting(app, max_connections=2) as hosted,
            hosted.connect() as first,
            hosted.connect() as second,
        ):
            await first.send_request("/slow?seconds=0.5", b"")
            await second.send_request("/slow?seconds=0.5", b"")
            while app.counts["started"] < 2:
                await anyio.sleep(0.01)
            for _ in range(5):  # newcomers find every slot busy
                async with hosted.connect() as third:
                    refused = await third.request("/echo", b"")
                    assert refused.status == 503 and refused.headers["retry-after"] == "1"
                    assert refused.json()["error"]["code"] == SERVER_BUSY
            assert (await first.reply()).json() == {"done": "slow"}
            assert (await second.reply()).status == 200


async def test_connections_are_bounded_and_an_idle_one_gives_its_slot_up() -> None:
    app = TinyApp()
    with anyio.fail_after(5):
        async with hosting(app, max_connections=1) as hosted, hosted.connect() as first:
            await first.send_request("/slow?seconds=0.5", b"")
            while app.counts["started"] < 1:
                await anyio.sleep(0.01)
            async with hosted.connect() as second:
                refused = await second.request("/echo", b"")
                assert refused.status == 503 and refused.headers["retry-after"] == "1"
                assert refused.json()["error"]["code"] == SERVER_BUSY
            assert (await first.reply()).status == 200
            # Idle between requests, it gives the slot up to a newcomer.
            async with hosted.connect() as third:
                assert (await third.request("/echo", b"third")).status == 200
            assert await first.closed_by_server()


class Slot:
    def __init__(self) -> None:
        self.evicted = False

    def evict(self) -> None:
        self.evicted = True


def test_a_young_kept_alive_connection_keeps_its_slot_from_newcomers() -> None:
    # Its client was told it may reuse it, and sends its next leg at once: evicted now,
    # that leg would meet a closed connection (issue 22, item 10).
    slots = ConnectionSlots(2)
    kept, arriving = Slot(), Slot()
    assert slots.admit(kept, 0.0) and slots.admit(arriving, 0.0)
    slots.busy(kept)
    slots.waiting(kept, 10.0)  # answered at 10 s, kept alive
    young = 10.0 + KEPT_ALIVE_GRACE / 2
    newcomer = Slot()
    assert slots.admit(newcomer, young) and arriving.evicted and not kept.evicted
    slots.busy(newcomer)
    assert not slots.admit(Slot(), young)  # none but a young kept-alive one: refused
    assert not kept.evicted and len(slots) == 2
    assert slots.admit(Slot(), 10.0 + KEPT_ALIVE_GRACE)  # past its grace: it may go now
    assert kept.evicted and kept not in slots


async def test_a_response_on_full_slots_promises_no_reuse() -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp(), max_connections=2) as hosted, hosted.connect() as first:
            alone = await first.request("/echo", b"alone")  # one slot of two: kept alive
            assert "connection" not in alone.headers
            async with hosted.connect() as second:  # every slot taken as it is answered
                full = await second.request("/echo", b"full")
                assert full.status == 200 and full.headers["connection"] == "close"
                assert await second.closed_by_server()
            assert (await first.request("/echo", b"again")).status == 200  # still good


async def test_a_request_sent_as_its_kept_alive_connection_closes_gets_a_503_not_a_reset() -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp(), max_connections=4) as hosted, hosted.connect() as peer:
            assert (await peer.request("/echo", b"one")).status == 200  # kept alive
            (connection,) = hosted.host._connections
            request = peer.h11.send(
                h11.Request(
                    method="POST", target="/echo", headers=[("Host", "h"), ("Content-Length", "3")]
                )
            )
            request = (request or b"") + (peer.h11.send(h11.Data(data=b"two")) or b"")
            request += peer.h11.send(h11.EndOfMessage()) or b""
            # Written at once (no await: the host's task cannot read it first), and the
            # host decides to close the connection (a newcomer evicted it, say).
            os.write(peer.stream.extra(SocketAttribute.raw_socket).fileno(), request)
            connection.evict()
            refused = await peer.reply()
            assert refused.status == 503 and refused.headers["retry-after"] == "1"
            assert refused.headers["connection"] == "close"
            assert refused.json()["error"]["code"] == SERVER_BUSY
            assert await peer.closed_by_server()


async def test_a_connection_evicted_after_its_request_was_read_says_close_on_its_answer() -> None:
    # The race of issue 22, item 10: the eviction meets the last bytes of a kept-alive
    # connection's next request in one step (trio hands the read over, the cancel comes
    # too late to stop it).  Its request is answered; before the fix the answer promised
    # reuse and the host then closed the connection under the client's next request.
    with anyio.fail_after(5):
        async with hosting(TinyApp(), max_connections=4) as hosted, hosted.connect() as peer:
            assert (await peer.request("/echo", b"one")).status == 200  # kept alive
            (connection,) = hosted.host._connections
            await peer.send_request("/slow?seconds=0.2", b"two")
            while not hosted.host.slots._busy:  # (its request whole: the app runs)
                await anyio.sleep(0.01)
            connection.evict()  # as the racing newcomer would have
            answered = await peer.reply()
            assert answered.status == 200 and answered.json() == {"done": "slow"}
            assert answered.headers["connection"] == "close"
            assert await peer.closed_by_server()


async def test_a_request_whose_body_is_on_its_way_is_evicted_with_a_503() -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp(), max_connections=1) as hosted:
            stream = await anyio.connect_tcp(hosted.address, hosted.port)
            async with stream:
                await stream.send(b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n{")
                while hosted.host.slots._waiting == {}:  # (admitted: waiting for its body)
                    await anyio.sleep(0.01)
                await anyio.sleep(0.05)
                async with hosted.connect() as newcomer:
                    assert (await newcomer.request("/echo", b"new")).status == 200
                received = b""
                try:
                    while True:
                        received += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    pass
            assert status_of(received) == 503 and b"retry-after: 1" in received


async def test_graceful_shutdown_finishes_running_requests() -> None:
    app = TinyApp()
    drained: list[bool] = []
    with anyio.fail_after(5):
        host = AsgiHost(app, on_drain=lambda: drained.append(True))
        async with anyio.create_task_group() as tasks:
            address, port = await tasks.start(host.serve, "127.0.0.1", 0)
            hosted_name = f"{address}:{port}"
            from host_peer import HttpPeer

            slow = HttpPeer(await anyio.connect_tcp(address, port), hosted_name)
            idle = HttpPeer(await anyio.connect_tcp(address, port), hosted_name)
            assert (await idle.request("/echo", b"idle")).status == 200
            await slow.send_request("/slow?seconds=0.4", b"")
            while app.counts["started"] < 2:  # the slow request is running now
                await anyio.sleep(0.01)
            closing = anyio.Event()

            async def close() -> None:
                await host.aclose(grace=3.0)
                closing.set()

            tasks.start_soon(close)
            while not host.closing:
                await anyio.sleep(0.01)
            # A newcomer during the drain is told to go elsewhere.
            newcomer = HttpPeer(await anyio.connect_tcp(address, port), hosted_name)
            refused = await newcomer.request("/echo", b"late")
            assert refused.status == 503 and refused.headers["retry-after"] == "1"
            # The running request was answered, then its connection closed.
            reply = await slow.reply()
            assert reply.json() == {"done": "slow"} and reply.headers["connection"] == "close"
            assert await idle.closed_by_server()
            await closing.wait()
            assert drained == [True]
            assert app.lifespan == ["lifespan.startup", "lifespan.shutdown"]
            with pytest.raises(OSError):
                await anyio.connect_tcp(address, port)
            for peer in (slow, idle, newcomer):
                await peer.stream.aclose()


async def test_shutdown_cancels_what_outlives_the_grace() -> None:
    app = TinyApp()
    with anyio.fail_after(5):
        async with hosting(app, grace=0.3) as hosted, hosted.connect() as peer:
            await peer.send_request("/slow?seconds=60", b"")
            while app.counts["started"] < 1:
                await anyio.sleep(0.01)
        assert app.counts["answered"] == 0
        assert await peer.closed_by_server()


OK = b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"
CHUNKED = b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"


def with_fields(fields: bytes) -> bytes:
    """``OK`` with ``fields`` after its Host."""
    return OK.replace(b"Host: h\r\n", b"Host: h\r\n" + fields)


def kinds() -> list[tuple[str, bytes, set[int], bool]]:
    """Malformed or unusual requests about HTTP itself: (name, bytes, statuses, may close)."""
    bad = {400}
    huge = b"y" * 70_000
    return [
        ("fine", OK, {200}, False),
        ("HTTP/1.0", OK.replace(b"HTTP/1.1", b"HTTP/1.0"), {200}, False),
        ("Connection: close", with_fields(b"Connection: close\r\n"), {200}, False),
        ("pipelined pair", OK + OK, {200}, False),
        ("pipelined garbage after", OK + b"GARBAGE\r\n\r\n", {200}, False),
        ("garbage", b"GARBAGE\r\n\r\n", bad, True),
        ("a head cut short", b"POST /echo HTTP/1.1\r\nHost: loc", bad, True),
        ("nothing at all", b"", set(), True),
        ("no Host on HTTP/1.1", b"GET /echo HTTP/1.1\r\n\r\n", bad, False),
        ("two Hosts", b"GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", bad, False),
        ("bad Content-Length", OK.replace(b"Length: 2", b"Length: x"), bad, False),
        ("two Content-Lengths", with_fields(b"Content-Length: 3\r\n"), bad, False),
        ("Content-Length past the body", OK.replace(b"Length: 2", b"Length: 9"), bad, True),
        ("chunked: bad size", CHUNKED + b"zz\r\n", bad, True),
        ("chunked: cut short", CHUNKED + b"10\r\nabc", bad, True),
        ("one huge header", b"GET / HTTP/1.1\r\nHost: h\r\nX: " + huge + b"\r\n\r\n", {431}, False),
        ("target too long", b"GET /?" + huge + b" HTTP/1.1\r\nHost: h\r\n\r\n", {431}, False),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", {505}, False),
        ("Expect: 100-continue", with_fields(b"Expect: 100-continue\r\n"), {200}, False),
        (
            "Upgrade: websocket",
            with_fields(b"Upgrade: websocket\r\nConnection: Upgrade\r\n"),
            {200, 400, 501},
            True,
        ),
    ]


async def test_every_malformed_request_gets_a_clear_answer() -> None:
    outcomes: dict[str, bytes] = {}
    with server_log() as records, anyio.fail_after(30):
        async with (
            hosting(TinyApp(), head_timeout=5.0, body_timeout=5.0) as hosted,
            anyio.create_task_group() as tasks,
        ):
            for name, data, _, _ in kinds():

                async def one(name: str = name, data: bytes = data) -> None:
                    outcomes[name] = await hosted.raw(data)

                tasks.start_soon(one)
    wrong = {}
    for name, _, statuses, may_close in kinds():
        answers = [a for a in responses(outcomes[name]) if a[0] != 100]
        if not answers:
            if not may_close:
                wrong[name] = "closed without an answer"
            continue
        status, content_type, body = answers[0]
        if status not in statuses:
            wrong[name] = f"{status}: {body[:200]!r}"
        for status, content_type, body in answers:
            if status >= 400 and body:  # every refusal of the host is a JSON-RPC error
                assert content_type == "application/json", (name, body)
                assert json.loads(body)["error"]["message"], name
    assert not wrong, "\n".join(f"{name}: {what}" for name, what in wrong.items())
    assert not tracebacks(records)


def responses(data: bytes) -> list[tuple[int, str | None, bytes]]:
    """The responses in ``data`` (framed by Content-Length): (status, type, body)."""
    found = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"an incomplete response: {data[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        length = int(fields.get("content-length", "0"))
        found.append((int(lines[0].split(" ")[1]), fields.get("content-type"), rest[:length]))
        data = rest[length:]
    return found


async def test_a_response_that_ends_its_connection_leaves_the_slots_at_once() -> None:
    # A long-lived stream (the MCP endpoint's listen and sessions' streams) says
    # connection: close: pools of the app's own bound it, so it stops taking a slot.
    # (Three slots for two connections: a response written while every slot is taken
    # would end its connection, test_a_response_on_full_slots_promises_no_reuse.)
    with anyio.fail_after(10):
        async with (
            hosting(TinyApp(), max_connections=3) as hosted,
            hosted.connect() as streaming,
            hosted.connect() as plain,
        ):
            assert (await plain.request("/echo", b"{}")).status == 200  # kept alive: a slot
            await streaming.send_request("/stream?n=100&close=1", b"")
            head = await streaming.head()
            assert head.status_code == 200
            assert (b"connection", b"close") in head.headers
            assert len(hosted.host.slots) == 1  # the kept-alive one's alone
            assert (await plain.request("/echo", b"{}")).status == 200  # the stream still on
            while not isinstance(await streaming.next_event(), h11.EndOfMessage):
                pass
            assert await streaming.closed_by_server()  # it ends with its stream
