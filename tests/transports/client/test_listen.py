"""``Client.listen()`` (subscriptions/listen) against real servers: the in-process HTTP
server on 127.0.0.1, ``mrtr serve --stdio`` subprocesses, and a scripted HTTP peer
for the endings our server does not produce (a dropped stream, no acknowledgement)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from mrtr_transports.client.client import Client, TraceRecord
from mrtr_transports.client.errors import CallError, CallTimeout, TransportError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.listen import SUBSCRIPTION_ID
from mrtr_transports.client.stdio import open_stdio_client
from mrtr_transports.server.http import HttpServer
from support.cache_app import CountingApp, make_app
from support.cli_run import MRTR, TESTS_ON_PATH
from support.peer_http_server import (
    DISCOVER,
    PeerHttpServer,
    Reply,
    Seen,
    error,
    json_reply,
    result,
    sse_reply,
)

import mrtr_core as m


@asynccontextmanager
async def serving(app: CountingApp, **options: Any) -> AsyncIterator[tuple[str, HttpServer]]:
    server = HttpServer(app, **options)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        try:
            yield f"http://{host}:{port}/mcp", server
        finally:
            await server.aclose(grace=0.5)


async def eventually(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    with trio.fail_after(seconds):
        while not condition():
            await trio.sleep(0.02)


async def test_listen_delivers_what_another_client_triggers() -> None:
    app = make_app()
    tools_seen: list[m.Notification] = []
    updated: list[str] = []
    relisted: list[int] = []
    with trio.fail_after(10):
        async with (
            serving(app) as (url, _),
            open_http_client(url) as client,
            open_http_client(url) as other,
        ):

            async def on_update(note: m.Notification) -> None:  # async: runs as a task
                updated.append((note.params or {})["uri"])
                relisted.append(len(await client.list_tools()))

            client.on_list_changed("tools", tools_seen.append)
            client.on_resource_updated(on_update)
            async with client.listen(
                tools=True, prompts=True, resource_uris=["test://public", "test://public"]
            ) as sub:
                assert sub.acknowledged == {
                    "toolsListChanged": True,
                    "promptsListChanged": True,
                    "resourceSubscriptions": ["test://public"],
                }
                await other.call_tool("add_tool")
                await other.call_tool("touch")
                first, second = await sub.__anext__(), await sub.__anext__()
                assert [first.method, second.method] == [
                    "notifications/tools/list_changed",
                    "notifications/resources/updated",
                ]
                tag = (first.params or {})["_meta"][SUBSCRIPTION_ID]
                assert tag == (second.params or {})["_meta"][SUBSCRIPTION_ID]
                await eventually(lambda: bool(relisted))
            assert [n.method for n in tools_seen] == ["notifications/tools/list_changed"]
            assert updated == ["test://public"] and relisted[0] >= 3


async def test_two_subscriptions_each_get_their_own() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with (
            serving(app) as (url, _),
            open_http_client(url) as client,
            client.listen(tools=True) as tools,
            client.listen(resource_uris=["test://public"]) as resources,
        ):
            await client.call_tool("touch")
            await client.call_tool("add_tool")
            assert (await tools.__anext__()).method == "notifications/tools/list_changed"
            assert (await resources.__anext__()).method == "notifications/resources/updated"
            assert app.subscription_count == 2


async def test_leaving_closes_the_stream_on_the_server() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with serving(app) as (url, server), open_http_client(url) as client:
            async with client.listen(tools=True):
                assert app.subscription_count == 1 and len(server.listens) == 1
            await eventually(lambda: app.subscription_count == 0 and len(server.listens) == 0)
            # The client goes on as before.
            assert (await client.call_tool("listening"))["content"][0]["text"] == "0"


async def test_graceful_end_is_reopened() -> None:
    app = make_app()
    with trio.fail_after(15):
        async with (
            serving(app, listen_lifetime=1.2) as (url, _),
            open_http_client(url) as client,
            client.listen(tools=True) as sub,
        ):
            await eventually(lambda: sub.opened == 2, seconds=8)
            assert sub.graceful_ends == 1 and sub.error is None
            await client.call_tool("add_tool")  # delivered on the new stream
            assert (await sub.__anext__()).method == "notifications/tools/list_changed"


async def test_graceful_end_without_reopen_ends_the_iteration() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with (
            serving(app, listen_lifetime=0.3) as (url, _),
            open_http_client(url) as client,
            client.listen(tools=True, reopen=False) as sub,
        ):
            got = [note async for note in sub]
            assert got == [] and sub.graceful_ends == 1 and sub.error is None
            assert sub.ended.is_set() and app.subscription_count == 0


async def test_a_busy_refusal_waits_for_retry_after() -> None:
    app = make_app()
    sent: list[TraceRecord] = []
    with trio.fail_after(20):
        async with (
            serving(app, max_listen_streams_per_client=1, listen_lifetime=1.5) as (url, _),
            open_http_client(url) as holder,
            open_http_client(url, tracer=sent.append) as client,
            holder.listen(tools=True, reopen=False),
        ):
            started = trio.current_time()
            # Refused (429, retryAfterSeconds) while the holder's stream lives.
            async with client.listen(tools=True, ack_timeout=15) as sub:
                waited = trio.current_time() - started
                assert sub.acknowledged == {"toolsListChanged": True}
    attempts = [
        r for r in sent if r.dir == "send" and r.msg.get("method") == "subscriptions/listen"
    ]
    assert 2 <= len(attempts) <= 4  # waited as told, not hammering the server
    assert waited >= 0.5


async def test_an_error_retrying_cannot_cure_is_raised() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with serving(app) as (url, _), open_http_client(url) as client:
            with pytest.raises(CallError) as caught:
                async with client.listen(resource_uris=[f"test://{i}" for i in range(300)]):
                    raise AssertionError("opened")
            assert caught.value.code == m.ErrorCode.INVALID_PARAMS
            with pytest.raises(TypeError, match="not one URI"):
                async with client.listen(resource_uris="test://public"):
                    raise AssertionError("opened")


def scripted(listen: Callable[[Seen, int], Awaitable[Reply]]) -> Callable[[Seen], Any]:
    count = [0]

    async def handler(seen: Seen) -> Reply:
        method = seen.rpc_method
        if method == "server/discover":
            return json_reply(result(seen, DISCOVER))
        if method == "subscriptions/listen":
            count[0] += 1
            return await listen(seen, count[0])
        return json_reply(error(seen, m.ErrorCode.METHOD_NOT_FOUND, "Method not found"), 404)

    return handler


def ack(seen: Seen) -> dict[str, Any]:
    tag = {SUBSCRIPTION_ID: seen.body["id"]}
    params = {"_meta": tag, "notifications": seen.params["notifications"]}
    return {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": params,
    }


async def with_peer(
    listen: Callable[[Seen, int], Awaitable[Reply]],
    body: Callable[[Client], Awaitable[None]],
    abandoned: int = 0,
) -> PeerHttpServer:
    """Run ``body`` against the scripted peer, then wait until the peer has seen
    ``abandoned`` held streams closed by the client."""
    server = PeerHttpServer(scripted(listen))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(server.run)
            async with open_http_client(url) as client:
                await body(client)
            await eventually(lambda: len(server.abandoned) == abandoned)
            nursery.cancel_scope.cancel()
    return server


async def test_a_dropped_stream_is_reopened_after_a_backoff() -> None:
    async def listen(seen: Seen, count: int) -> Reply:
        return sse_reply([ack(seen)], break_after=1 if count < 3 else None, hold=count >= 3)

    async def body(client: Client) -> None:
        async with client.listen(tools=True, initial_backoff=0.05) as sub:
            await eventually(lambda: sub.opened == 3)
            assert sub.graceful_ends == 0 and sub.error is None

    server = await with_peer(listen, body, abandoned=1)  # the last, closed on exit
    assert [s.rpc_method for s in server.seen].count("subscriptions/listen") == 3


async def test_a_dropped_stream_without_reopen_raises_from_the_iteration() -> None:
    async def listen(seen: Seen, count: int) -> Reply:
        return sse_reply([ack(seen)], break_after=1)

    async def body(client: Client) -> None:
        async with client.listen(tools=True, reopen=False) as sub:
            with pytest.raises(TransportError):
                async for _ in sub:
                    raise AssertionError("no notification was sent")

    await with_peer(listen, body)


async def test_no_acknowledgement_times_out() -> None:
    async def listen(seen: Seen, count: int) -> Reply:
        return sse_reply([], hold=True)

    async def body(client: Client) -> None:
        with pytest.raises(CallTimeout):
            async with client.listen(tools=True, ack_timeout=0.3):
                raise AssertionError("acknowledged")

    await with_peer(listen, body, abandoned=1)  # the stream was closed


def stdio_argv() -> list[str]:
    return [*MRTR, "serve", "--stdio", "--app", "support.cache_app:app"]


@pytest.mark.subprocess
async def test_stdio_listen_and_cancel_on_exit() -> None:
    sent: list[TraceRecord] = []
    with trio.fail_after(20):
        async with open_stdio_client(stdio_argv(), env=TESTS_ON_PATH, tracer=sent.append) as client:
            async with client.listen(tools=True) as sub:
                await client.call_tool("add_tool")
                note = await sub.__anext__()
                assert note.method == "notifications/tools/list_changed"
                assert (await client.call_tool("listening"))["content"][0]["text"] == "1"
            listen_id = next(
                r.msg["id"] for r in sent if r.msg.get("method") == "subscriptions/listen"
            )
            cancels = [r.msg for r in sent if r.msg.get("method") == "notifications/cancelled"]
            assert [c["params"]["requestId"] for c in cancels] == [listen_id]

            async def closed() -> bool:
                text = (await client.call_tool("listening"))["content"][0]["text"]
                return bool(json.loads(text) == 0)

            with trio.fail_after(5):
                while not await closed():
                    await trio.sleep(0.05)


async def test_handlers_see_untagged_notices_but_not_closed_streams() -> None:
    # A 2025-era session's list_changed has no subscription id: handlers see it.  One
    # tagged with a stream that is no longer open (a straggler) is not delivered.
    app = make_app()
    seen: list[Any] = []
    with trio.fail_after(10):
        async with serving(app) as (url, _), open_http_client(url) as client:
            client.on_list_changed("prompts", lambda note: seen.append(note.params))
            notes = client._notes
            notes.deliver(m.Notification(method="notifications/prompts/list_changed", params={}))
            stale = {"_meta": {SUBSCRIPTION_ID: 12345}}
            notes.deliver(m.Notification(method="notifications/prompts/list_changed", params=stale))
            notes.deliver(m.Notification(method="notifications/tools/list_changed", params={}))

            def boom(note: m.Notification) -> None:
                raise RuntimeError("a handler's own bug")

            client.on_list_changed("prompts", boom)  # logged, the next one still runs
            client.on_list_changed("prompts", lambda note: seen.append("after boom"))
            notes.deliver(m.Notification(method="notifications/prompts/list_changed"))
    assert seen == [{}, None, "after boom"]


async def test_a_2025_session_has_no_listen_streams() -> None:
    with trio.fail_after(20):
        async with open_stdio_client(stdio_argv(), env=TESTS_ON_PATH, era="legacy") as client:
            assert client.era == "legacy"
            with pytest.raises(CallError) as caught:
                async with client.listen(tools=True):
                    raise AssertionError("opened")
            assert caught.value.code == m.ErrorCode.METHOD_NOT_FOUND
            # The session goes on.
            assert (await client.call_tool("listening"))["content"][0]["text"] == "0"
