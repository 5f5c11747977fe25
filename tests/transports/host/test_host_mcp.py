"""The host serving today's MCP endpoint (``McpAsgi``), on trio and asyncio, on 127.0.0.1.

The endpoint is ``support.asgi_apps``' ``McpApp`` (its handlers use anyio, so
it runs on both loops) as ``McpAsgi``; the host adds what uvicorn and
hypercorn left out when probed: a 20 KiB or 70 KiB head gets 431, a head
trickled a byte at a time is cut at ``head_timeout``, tricklers are evicted
for a real client, and a request in flight is never evicted.  MCP itself
answers as it does under any ASGI server: JSON or an SSE stream, a client
that goes cancels its handler, and the drain ends a listen stream with its
result (``on_drain=McpAsgi.shutdown``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
import h11
import pytest
from host_peer import HttpPeer, Trickler, hosting, server_log, status_of, tracebacks
from mrtr_transports.apps.mcp_app import SUBSCRIPTION_ID, McpApp
from mrtr_transports.asgi import McpAsgi
from mrtr_transports.host import AsgiHost
from mrtr_transports.host.refusals import SERVER_BUSY
from support import asgi_apps
from support.raw_http import ACCEPT_BOTH, sse_messages, tool_call

import mrtr_core as m

pytestmark = pytest.mark.anyio


def endpoint(**options: Any) -> McpAsgi:
    """A fresh endpoint for the shared app (so one test's shutdown is not another's)."""
    return McpAsgi(asgi_apps.mcp, max_body_size=asgi_apps.MAX_BODY, **options)


async def post(
    peer: HttpPeer,
    message: Mapping[str, Any],
    *,
    extra: list[tuple[str, str]] | None = None,
    send_only: bool = False,
) -> Any:
    """POST ``message`` to ``/mcp`` with its mirrored headers; the reply (unless ``send_only``)."""
    fields = [("Accept", ACCEPT_BOTH), *m.http.request_headers(message), *(extra or [])]
    await peer.send_request("/mcp", json.dumps(message).encode(), extra=fields)
    return None if send_only else await peer.reply()


def result_text(message: Mapping[str, Any]) -> str:
    return str(message["result"]["content"][0]["text"])


async def test_a_call_as_json_and_one_as_a_stream_on_one_connection() -> None:
    with anyio.fail_after(10):
        async with hosting(endpoint()) as hosted, hosted.connect() as peer:
            plain = await post(peer, tool_call("greet", {"name": "Ada"}))
            assert result_text(plain.json()) == "hello, Ada"
            streamed = await post(peer, tool_call("steps", progress_token="p"))
            assert streamed.headers["content-type"] == "text/event-stream"
            events = sse_messages(streamed.body)
            assert len(events) == 4 and result_text(events[-1]) == "done in 3 steps"
            again = await post(peer, tool_call("greet", {"name": "Bo"}, rid=2))
            assert result_text(again.json()) == "hello, Bo"


@pytest.mark.parametrize("size", [20 * 1024, 70 * 1024])
async def test_the_probed_header_sizes_get_431_before_the_endpoint(size: int) -> None:
    with anyio.fail_after(10):
        async with hosting(endpoint()) as hosted, hosted.connect() as peer:
            reply = await post(peer, tool_call("greet"), extra=[("X-Filler", "y" * size)])
            assert reply.status == 431
            assert reply.json()["error"]["message"] == "request header fields too large"


async def test_a_head_trickled_a_byte_at_a_time_is_cut_at_head_timeout() -> None:
    with anyio.fail_after(10):
        async with hosting(endpoint(), head_timeout=0.5) as hosted:
            trickler = Trickler(hosted, 0.05, reconnect_after=3600)
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(trickler.run)
                started = anyio.current_time()
                while not trickler.answers:
                    await anyio.sleep(0.01)
                elapsed = anyio.current_time() - started
                tasks.cancel_scope.cancel()
            assert trickler.answers == [408] and elapsed < 5


async def test_tricklers_are_evicted_for_a_real_client_and_a_call_in_flight_is_not() -> None:
    slots = 4
    with server_log() as records, anyio.fail_after(30):
        async with (
            hosting(endpoint(), max_connections=slots, head_timeout=60.0) as hosted,
            anyio.create_task_group() as attack,
            hosted.connect() as sleeper,
        ):
            await post(sleeper, tool_call("sleep"), send_only=True)  # runs until cancelled
            tricklers = [Trickler(hosted, 0.3, reconnect_after=0.2) for _ in range(slots - 1)]
            for trickler in tricklers:
                attack.start_soon(trickler.run)
                await trickler.connected.wait()
            while len(hosted.host.slots) < slots:
                await anyio.sleep(0.01)
            for round_ in range(3):
                async with hosted.connect() as peer:
                    reply = await post(peer, tool_call("greet", {"name": f"r{round_}"}))
                    assert result_text(reply.json()) == f"hello, r{round_}"
            attack.cancel_scope.cancel()
            # The sleeper's call was never evicted: its connection is still served.
            assert not await _closed_soon(sleeper)
    evicted = [status for t in tricklers for status in t.answers]
    assert evicted and set(evicted) == {503}
    assert not tracebacks(records)


async def _closed_soon(peer: HttpPeer) -> bool:
    with anyio.move_on_after(0.2):
        return await peer.closed_by_server()
    return False


async def test_every_slot_running_a_call_refuses_a_newcomer_with_server_busy() -> None:
    with anyio.fail_after(10):
        async with (
            hosting(endpoint(), max_connections=1) as hosted,
            hosted.connect() as first,
        ):
            await post(first, tool_call("pause", progress_token="p"), send_only=True)
            assert (await first.head()).status_code == 200  # streaming: the call runs
            async with hosted.connect() as second:
                refused = await post(second, tool_call("greet"))
                assert refused.status == 503 and refused.headers["retry-after"] == "1"
                assert refused.json()["error"]["code"] == SERVER_BUSY
            body = b""
            while not isinstance(event := await first.next_event(), h11.EndOfMessage):
                body += event.data
            assert result_text(sse_messages(body)[-1]) == "paused"


async def test_a_client_that_goes_cancels_its_handler() -> None:
    before = asgi_apps.cancelled
    with anyio.fail_after(10):
        async with hosting(endpoint()) as hosted:
            async with hosted.connect() as peer:
                await post(peer, tool_call("sleep"), send_only=True)
                await anyio.sleep(0.2)  # the handler runs
            while asgi_apps.cancelled == before:
                await anyio.sleep(0.01)


async def test_an_empty_post_that_closes_gets_its_400_at_once() -> None:
    head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 0\r\n"
    head += b"Content-Type: application/json\r\nAccept: " + ACCEPT_BOTH.encode() + b"\r\n\r\n"
    with anyio.fail_after(5):
        async with hosting(endpoint()) as hosted:
            data = await hosted.raw(head)
    assert status_of(data) == 400
    error = json.loads(data.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == m.ErrorCode.PARSE_ERROR and "empty body" in error["message"]


async def test_a_body_past_max_body_size_gets_413_declared_or_chunked() -> None:
    big = json.dumps(tool_call("greet", {"name": "x" * (2 * asgi_apps.MAX_BODY)})).encode()
    with anyio.fail_after(10):
        async with hosting(endpoint(), max_body_size=asgi_apps.MAX_BODY) as hosted:
            async with hosted.connect() as peer:
                assert (await post(peer, json.loads(big))).status == 413
            chunked = (
                b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n" % len(big)
                + big
                + b"\r\n0\r\n\r\n"
            )
            assert status_of(await hosted.raw(chunked)) == 413


async def test_the_drain_ends_a_listen_stream_with_its_result() -> None:
    app = McpApp("listen-test", "1.0")
    app.add_tool(lambda ctx: "ok", name="noop")
    asgi = McpAsgi(app)
    host = AsgiHost(asgi, on_drain=asgi.shutdown)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            address, port = await tasks.start(host.serve, "127.0.0.1", 0)
            async with await anyio.connect_tcp(address, port) as stream:
                peer = HttpPeer(stream, f"{address}:{port}")
                listen = {
                    "jsonrpc": "2.0",
                    "id": 9,
                    "method": "subscriptions/listen",
                    "params": {
                        "notifications": {"toolsListChanged": True},
                        "_meta": tool_call("noop")["params"]["_meta"],
                    },
                }
                await post(peer, listen, send_only=True)
                assert (await peer.head()).status_code == 200
                while app.subscription_count < 1:
                    await anyio.sleep(0.01)
                await host.aclose(grace=2.0)  # not cut at the grace: ended with its result
                body = b""
                while not isinstance(event := await peer.next_event(), h11.EndOfMessage):
                    body += event.data
    last = sse_messages(body)[-1]
    assert last["id"] == 9 and last["result"]["_meta"][SUBSCRIPTION_ID] == 9
    assert app.subscription_count == 0
