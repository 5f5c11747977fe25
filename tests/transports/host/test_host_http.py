"""The host as an ASGI server, on real sockets on 127.0.0.1, on trio and asyncio.

A tiny ASGI app (``tiny_app.py``) is served by ``AsgiHost``; a raw h11 client
checks what an ASGI server owes any app: the scope, the body as it comes,
keep-alive, streaming without a length, ``HEAD``, ``http.disconnect`` when the
client goes, a 500 for an app that fails, the lifespan and its state.
"""

from __future__ import annotations

import json

import anyio
import pytest
from host_peer import body_of, hosting, server_log, status_of
from mrtr_transports.host import AsgiHost, LifespanFailure, serve_asgi
from tiny_app import TinyApp

pytestmark = pytest.mark.anyio


async def test_a_request_and_two_more_on_one_kept_alive_connection() -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp()) as hosted, hosted.connect() as peer:
            first = await peer.request("/echo", b'{"a": 1}')
            streamed = await peer.request("/stream?n=4", b"")
            third = await peer.request("/echo?x=1", b"three", method="PUT")
            assert first.json() == {"echo": '{"a": 1}', "method": "POST"}
            assert streamed.headers["transfer-encoding"] == "chunked"
            assert streamed.body == b"".join(f"data: {i}\n\n".encode() for i in range(4))
            assert third.json() == {"echo": "three", "method": "PUT"}


async def test_the_scope_is_an_asgi_http_scope() -> None:
    seen: list[dict[str, object]] = []

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            seen.append(dict(scope))
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    with anyio.fail_after(5):
        async with hosting(app) as hosted, hosted.connect() as peer:
            reply = await peer.request("/a%20b/c?q=1&r=2", extra=[("X-Thing", "v")])
            assert reply.status == 204
            (scope,) = seen
            assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
            assert (scope["method"], scope["http_version"]) == ("GET", "1.1")
            assert scope["scheme"] == "http"
            assert (scope["path"], scope["raw_path"]) == ("/a b/c", b"/a%20b/c")
            assert scope["query_string"] == b"q=1&r=2"
            assert (b"x-thing", b"v") in scope["headers"]  # type: ignore[operator]
            assert scope["server"] == ("127.0.0.1", hosted.port)
            client = scope["client"]
            assert isinstance(client, tuple) and client[0] == "127.0.0.1"


async def test_a_body_in_chunks_reaches_the_app_whole() -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp()) as hosted:
            body = json.dumps({"text": "x" * 200_000}).encode()
            head = b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            chunks = b"".join(
                b"%x\r\n%s\r\n" % (len(body[i : i + 7000]), body[i : i + 7000])
                for i in range(0, len(body), 7000)
            )
            data = await hosted.raw(head + chunks + b"0\r\n\r\n")
            assert status_of(data) == 200
            assert json.loads(json.loads(body_of(data))["echo"]) == {"text": "x" * 200_000}


async def test_head_gets_the_headers_and_no_body() -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp()) as hosted:
            async with hosted.connect() as peer:
                get = await peer.request("/echo")
                head = await peer.request("/echo", method="HEAD")
                assert (get.status, head.status) == (200, 200)
                assert head.body == b"" and get.body
                assert head.headers.keys() == get.headers.keys()  # (its echo says HEAD)
                assert int(head.headers["content-length"]) == len(get.body) + 1
                assert (await peer.request("/echo", b"next")).json()["echo"] == "next"
            data = await hosted.raw(b"HEAD /echo HTTP/1.1\r\nHost: h\r\n\r\n")
            assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"\r\n\r\n")


async def test_a_client_that_goes_gets_its_app_an_http_disconnect() -> None:
    app = TinyApp()
    with anyio.fail_after(5):
        async with hosting(app) as hosted:
            async with hosted.connect() as peer:
                await peer.send_request("/sleep", b"")
                while app.counts["started"] < 1:
                    await anyio.sleep(0.01)
            while app.counts["disconnected"] < 1:
                await anyio.sleep(0.01)


async def test_an_app_that_fails_or_says_nothing_gets_its_client_a_500() -> None:
    with server_log() as records, anyio.fail_after(5):
        async with hosting(TinyApp()) as hosted, hosted.connect() as peer:
            crashed = await peer.request("/crash")
            assert crashed.status == 500 and crashed.json()["error"]["message"]
            silent = await peer.request("/silent")
            assert silent.status == 500 and "no response" in silent.json()["error"]["message"]
            assert (await peer.request("/echo", b"after")).status == 200  # kept alive
    assert any("crashed (on purpose)" in str(r.exc_info) for r in records)


async def test_a_response_the_app_left_unread_ends_the_connection() -> None:
    with anyio.fail_after(5):
        async with hosting(TinyApp()) as hosted, hosted.connect() as peer:
            reply = await peer.request("/early", b"x" * 100_000)  # answered, body unread
            assert reply.status == 413
            assert await peer.closed_by_server()


async def test_a_response_larger_than_the_socket_takes_at_once_reaches_a_slow_reader() -> None:
    size = 3 * 1024 * 1024
    with anyio.fail_after(20):
        async with hosting(TinyApp()) as hosted, hosted.connect() as peer:
            await peer.send_request(f"/big?n={size}", b"")
            await anyio.sleep(0.3)  # the host's write fills the socket buffers meanwhile
            reply = await peer.reply()
            assert reply.body == b"x" * size
            assert (await peer.request("/echo", b"after")).json()["echo"] == "after"


async def test_the_lifespan_runs_around_the_connections_and_its_state_reaches_scopes() -> None:
    app = TinyApp()
    with anyio.fail_after(5):
        async with hosting(app) as hosted:
            assert app.lifespan == ["lifespan.startup"]
            assert (await hosted.request("/state")).json() == {"state": {"greeting": "hello"}}
        assert app.lifespan == ["lifespan.startup", "lifespan.shutdown"]


async def test_an_app_without_a_lifespan_is_served_and_a_failed_startup_stops_the_host() -> None:
    async def no_lifespan(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            raise ValueError("http only")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"fine"})

    async def failing(scope, receive, send):  # type: ignore[no-untyped-def]
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    with anyio.fail_after(5):
        async with hosting(no_lifespan) as hosted:
            assert (await hosted.request("/")).body == b"fine"
        with pytest.raises(LifespanFailure, match="no database"):
            await serve_asgi(failing)


async def test_cancelling_serve_asgi_closes_everything() -> None:
    app = TinyApp()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            address, port = await tasks.start(serve_asgi, app)
            stream = await anyio.connect_tcp(address, port)
            await stream.send(b"GET /sleep HTTP/1.1\r\nHost: h\r\n\r\n")
            while app.counts["started"] < 1:
                await anyio.sleep(0.01)
            tasks.cancel_scope.cancel()
        with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
            await stream.receive()
        await stream.aclose()


def test_an_asgi_host_serves_once() -> None:
    async def main() -> None:
        host = AsgiHost(TinyApp())
        async with anyio.create_task_group() as tasks:
            await tasks.start(host.serve)
            with pytest.raises(RuntimeError, match="serves once"):
                await host.serve()
            await host.aclose(grace=0.1)

    anyio.run(main)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_asyncio_an_app_may_await_an_asyncio_only_library() -> None:
    import asyncio

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        loop = asyncio.get_running_loop()  # asyncio's own API: raises off an asyncio loop
        future = loop.create_future()
        loop.call_later(0.01, future.set_result, b"from asyncio")
        body = await future
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    with anyio.fail_after(5):
        async with hosting(app) as hosted:
            assert (await hosted.request("/")).body == b"from asyncio"
