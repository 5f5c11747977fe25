"""The client's response cache against real servers: the in-process HTTP server on
127.0.0.1 and ``mrtr serve --stdio`` subprocesses.  Every "served from the cache"
is checked on the server side: the number of requests it handled."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from mrtr_transports.client.cache import MAX_INVALIDATED_KEYS, MemoryCacheStore, ResponseCache
from mrtr_transports.client.client import Client
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.stdio import open_stdio_client
from mrtr_transports.server.http import HttpServer
from support.cache_app import SHORT_TTL_MS, CountingApp, make_app
from support.cli_run import MRTR, TESTS_ON_PATH
from support.peer_http_server import (
    DISCOVER,
    PeerHttpServer,
    Reply,
    Seen,
    error,
    json_reply,
    result,
)

import mrtr_core as m

CAPS = {"elicitation": {}}


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    return {"action": "accept", "content": {"name": "Ada"}}


@asynccontextmanager
async def serving(app: CountingApp, **options: Any) -> AsyncIterator[str]:
    server = HttpServer(app, **options)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        try:
            yield f"http://{host}:{port}/mcp"
        finally:
            await server.aclose(grace=0.5)


async def test_a_second_list_within_the_ttl_comes_from_the_cache() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with serving(app) as url, open_http_client(url, cache=MemoryCacheStore()) as client:
            first = await client.list_tools()
            second = await client.list_tools()
            assert first == second and {t["name"] for t in first} >= {"seen", "add_tool"}
            assert app.seen["tools/list"] == 1
            for method in ["prompts/list", "resources/list", "resources/templates/list"]:
                await client.request(method)
                again = await client.request(method)
                assert again["ttlMs"] == 60_000 and again["cacheScope"] == "public"
                assert app.seen[method] == 1, method
            # "refresh" fetches and stores, "bypass" fetches and leaves the cache alone.
            await client.list_tools(cache="refresh")
            await client.list_tools(cache="bypass")
            await client.list_tools()
            assert app.seen["tools/list"] == 3
            assert client.cache is not None and client.cache.hits >= 5


async def test_a_cached_result_is_a_new_object_each_time() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with serving(app) as url, open_http_client(url, cache=MemoryCacheStore()) as client:
            first = await client.request("tools/list")
            first["tools"].clear()
            second = await client.request("tools/list")
            assert second["tools"] and app.seen["tools/list"] == 1


async def test_no_cache_unless_asked() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with serving(app) as url, open_http_client(url) as client:
            assert client.cache is None
            await client.request("tools/list")
            await client.request("tools/list")
    assert app.seen["tools/list"] == 2


async def test_resource_reads_are_cached_and_expire() -> None:
    app = make_app()
    store = ClockedStore()  # (the store's clock: no sleeping, no race with a slow machine)
    with trio.fail_after(10):
        async with serving(app) as url, open_http_client(url, cache=store) as client:
            read = {"uri": "test://public"}
            await client.call("resources/read", read)
            await client.call("resources/read", read)
            assert app.seen["resources/read"] == 1
            await client.call("resources/read", {"uri": "test://short"})
            store.now += SHORT_TTL_MS / 1000 - 0.001
            await client.call("resources/read", {"uri": "test://short"})
            assert app.seen["resources/read"] == 2
            store.now += 0.002  # past received + ttl: stale, fetched again
            await client.call("resources/read", {"uri": "test://short"})
            assert app.seen["resources/read"] == 3
            await client.call("resources/read", read)  # still fresh
            assert app.seen["resources/read"] == 3


class ClockedStore(MemoryCacheStore):
    """A store whose entries use its own clock (as one shared across processes would)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000_000.0

    def clock(self) -> float:
        return self.now


HINTS = {"ttlMs": 60_000, "cacheScope": "public"}


async def peer_that_asks_first(seen: Seen) -> Reply:
    """A 2026 server whose resources/read asks once, then answers with cache hints
    even on the retry's result (ours zeroes them; the client must not rely on it)."""
    method = seen.rpc_method
    if method == "server/discover":
        return json_reply(result(seen, {**DISCOVER, **HINTS}))
    if method == "resources/read" and "inputResponses" not in seen.params:
        asked = {"resultType": "input_required", "inputRequests": {"name": ASK}}
        return json_reply(result(seen, asked))
    if method == "resources/read":
        text = {"uri": seen.params["uri"], "text": "hello"}
        return json_reply(result(seen, {"resultType": "complete", "contents": [text], **HINTS}))
    return json_reply(error(seen, m.ErrorCode.METHOD_NOT_FOUND, "Method not found"), 404)


ASK = {
    "method": "elicitation/create",
    "params": {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}},
}


async def test_mrtr_rounds_are_never_cached() -> None:
    server = PeerHttpServer(peer_that_asks_first)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(server.run)
            async with open_http_client(
                url, cache=MemoryCacheStore(), answer=answer, capabilities=CAPS
            ) as client:
                for _ in range(2):
                    read = await client.call("resources/read", {"uri": "test://asks"})
                    assert read["contents"][0]["text"] == "hello" and read["ttlMs"] == 60_000
                # A retry sent by hand (it carries inputResponses) is not cached either.
                retry = {"uri": "test://asks", "inputResponses": {"name": {"action": "cancel"}}}
                await client.request("resources/read", retry)
                await client.request("resources/read", retry)
                assert client.cache is not None and client.cache.hits == 0
                assert len(client.cache.store) == 0  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()
    reads = [seen for seen in server.seen if seen.rpc_method == "resources/read"]
    assert len(reads) == 6  # two legs for each call, and both retries


async def test_our_server_zeroes_hints_on_retry_results() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with (
            serving(app) as url,
            open_http_client(
                url, cache=MemoryCacheStore(), answer=answer, capabilities=CAPS
            ) as client,
        ):
            for _ in range(2):
                read = await client.call("resources/read", {"uri": "test://asks"})
                assert read["contents"][0]["text"] == "hello" and read["ttlMs"] == 0
    assert app.seen["resources/read"] == 4


async def test_private_entries_are_per_principal_public_ones_shared() -> None:
    app = make_app()
    store = MemoryCacheStore()
    with trio.fail_after(10):
        async with (
            serving(app) as url,
            open_http_client(url, cache=store, principal="alice") as alice,
            open_http_client(url, cache=store, principal="bob") as bob,
        ):
            await alice.call("resources/read", {"uri": "test://private"})
            await alice.call("resources/read", {"uri": "test://private"})
            assert app.seen["resources/read"] == 1
            await bob.call("resources/read", {"uri": "test://private"})  # not alice's
            assert app.seen["resources/read"] == 2
            await bob.call("resources/read", {"uri": "test://private"})
            assert app.seen["resources/read"] == 2
            await alice.call("resources/read", {"uri": "test://public"})
            await bob.call("resources/read", {"uri": "test://public"})  # shared
            assert app.seen["resources/read"] == 3
    partitions = {key.partition for key in store._entries}
    assert partitions == {"alice", "bob", None}


async def test_the_authorization_header_names_the_principal() -> None:
    app = make_app()
    store = MemoryCacheStore()
    with trio.fail_after(10):
        async with serving(app) as url:
            for token in ["one", "two", "one"]:
                headers = {"Authorization": f"Bearer {token}"}
                async with open_http_client(url, cache=store, headers=headers) as client:
                    assert client.cache is not None
                    assert client.cache.principal is not None
                    assert token not in client.cache.principal  # a digest, not the token
                    await client.call("resources/read", {"uri": "test://private"})
    assert app.seen["resources/read"] == 2  # the second "one" was served from the cache


async def test_list_changed_invalidates_while_listening() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with (
            serving(app) as url,
            open_http_client(url, cache=MemoryCacheStore()) as client,
            open_http_client(url) as other,
            client.listen(tools=True, resource_uris=["test://public"]) as sub,
        ):
            await other.list_tools()  # (it lists before its first call over HTTP)
            before = await client.list_tools()
            await client.call("resources/read", {"uri": "test://public"})
            await client.list_tools()
            assert app.seen["tools/list"] == 2 and app.seen["resources/read"] == 1
            added = (await other.call_tool("add_tool"))["content"][0]["text"]
            note = await sub.__anext__()
            assert note.method == "notifications/tools/list_changed"
            after = await client.list_tools()
            assert app.seen["tools/list"] == 3
            assert {t["name"] for t in after} - {t["name"] for t in before} == {added}
            # resources/updated makes that URI stale, and only that one.
            await other.call_tool("touch")
            note = await sub.__anext__()
            assert note.method == "notifications/resources/updated"
            read = await client.call("resources/read", {"uri": "test://public"})
            assert read["contents"][0]["text"] == "public revision 1"
            assert app.seen["resources/read"] == 2
            await client.list_tools()
            assert app.seen["tools/list"] == 3


async def test_an_answer_in_flight_when_invalidated_is_not_stored() -> None:
    # The notification comes while tools/list is on the way: its answer may predate
    # the change, so it is returned but not kept.
    store = MemoryCacheStore()
    now = [10.0]
    cache = ResponseCache(store, "srv", clock=lambda: now[0])

    async def fetch() -> tuple[dict[str, Any], bool]:
        now[0] += 1
        cache.invalidate("notifications/tools/list_changed", {})
        now[0] += 1
        return {"tools": [], "ttlMs": 60_000, "cacheScope": "public"}, True

    assert await cache.fetch("tools/list", None, fetch) == {
        "tools": [],
        "ttlMs": 60_000,
        "cacheScope": "public",
    }
    assert len(store) == 0


async def test_memory_store_bounds() -> None:
    entry = m.caching.CacheEntry('"x"', "public", 0.0, 1.0)
    store = MemoryCacheStore(max_entries=3, max_bytes=10)
    keys = [m.caching.CacheKey("s", None, "resources/read", str(i)) for i in range(5)]
    for key in keys[:3]:
        await store.set(key, entry)
    await store.get(keys[0])  # recently used: kept
    await store.set(keys[3], entry)
    assert await store.get(keys[1]) is None and await store.get(keys[0]) == entry
    assert len(store) == 3 and store.bytes == 9
    await store.set(keys[4], m.caching.CacheEntry('"' + "y" * 6 + '"', "public", 0.0, 1.0))
    assert store.bytes <= 10 and await store.get(keys[4]) is not None
    big = m.caching.CacheEntry('"' + "z" * 20 + '"', "public", 0.0, 1.0)
    await store.set(keys[4], big)  # larger than the store: not kept (nor the old one)
    assert await store.get(keys[4]) is None
    await store.evict("s", "resources/read")
    assert len(store) == 0 and store.bytes == 0
    with pytest.raises(ValueError, match="positive"):
        MemoryCacheStore(max_entries=0)


class BrokenStore:
    async def get(self, key: m.caching.CacheKey) -> m.caching.CacheEntry | None:
        raise RuntimeError("down")

    async def set(self, key: m.caching.CacheKey, entry: m.caching.CacheEntry) -> None:
        raise RuntimeError("down")

    async def delete(self, key: m.caching.CacheKey) -> None:
        raise RuntimeError("down")

    async def evict(self, server: str, method: str, params: str | None = None) -> None:
        raise RuntimeError("down")


async def test_a_failing_store_costs_misses_not_requests() -> None:
    app = make_app()
    with trio.fail_after(10):
        async with serving(app) as url, open_http_client(url, cache=BrokenStore()) as client:
            assert len(await client.list_tools()) >= 2
            client._notes.deliver(
                m.Notification(method="notifications/tools/list_changed", params={})
            )
            assert len(await client.list_tools()) >= 2
    assert app.seen["tools/list"] == 2


def stdio_argv() -> list[str]:
    return [*MRTR, "serve", "--stdio", "--app", "support.cache_app:app"]


async def seen_by(client: Client) -> dict[str, int]:
    result = await client.call_tool("seen")
    counts: dict[str, int] = json.loads(result["content"][0]["text"])
    return counts


@pytest.mark.subprocess
async def test_stdio_cache_and_invalidation() -> None:
    with trio.fail_after(20):
        async with open_stdio_client(
            stdio_argv(), env=TESTS_ON_PATH, cache=MemoryCacheStore()
        ) as client:
            assert client.cache is not None and "support.cache_app:app" in client.cache.server
            async with client.listen(tools=True) as sub:
                await client.list_tools()
                await client.list_tools()
                assert (await seen_by(client)).get("tools/list") == 1
                await client.call_tool("add_tool")
                assert (await sub.__anext__()).method == "notifications/tools/list_changed"
                await client.list_tools()
                assert (await seen_by(client)).get("tools/list") == 2


async def test_a_store_with_its_own_clock_sets_the_time() -> None:
    app = make_app()
    store = ClockedStore()
    with trio.fail_after(10):
        async with serving(app) as url, open_http_client(url, cache=store) as client:
            await client.request("tools/list")
            (entry,) = store._entries.values()
            assert entry.expires_at == store.now + 60.0  # the store's clock, not trio's
            await client.request("tools/list")
            store.now += 61.0  # a minute later by the store's clock: stale
            await client.request("tools/list")
    assert app.seen["tools/list"] == 2


async def test_invalidation_times_are_bounded_and_fold_safely() -> None:
    store = MemoryCacheStore()
    now = [0.0]
    cache = ResponseCache(store, "srv", clock=lambda: now[0])
    hinted = {"contents": [], "ttlMs": 60_000, "cacheScope": "public"}

    async def fetch() -> tuple[dict[str, Any], bool]:
        return dict(hinted), True

    await cache.fetch("resources/read", {"uri": "test://0"}, fetch)
    now[0] += 1
    for i in range(MAX_INVALIDATED_KEYS + 100):  # a flood of updates for distinct URIs
        cache.invalidate("notifications/resources/updated", {"uri": f"test://{i}"})
    assert len(cache._invalidated) <= MAX_INVALIDATED_KEYS
    assert len(cache._pending) <= MAX_INVALIDATED_KEYS
    # test://0's own time was folded away, into one for every resources/read: still
    # stale (whatever the store still holds), never served.
    key = m.caching._policy.cache_params({"uri": "test://0"})
    assert ("resources/read", key) not in cache._invalidated
    assert cache._invalidated_at("resources/read", key) == 1.0
    now[0] += 1
    await cache.fetch("resources/read", {"uri": "test://0"}, fetch)
    assert cache.hits == 0 and cache.misses == 2


# --- Whose private entry: every credential the caller set separates users (issue 22) -----


async def private_reads(url: str, store: MemoryCacheStore, headers: dict[str, str]) -> Any:
    async with open_http_client(url, cache=store, headers=headers) as client:
        return await client.call("resources/read", {"uri": "test://private"})


@pytest.mark.parametrize(
    ("alice", "bob"),
    [
        ({"X-Api-Key": "alice-key"}, {"X-Api-Key": "bob-key"}),
        ({"Cookie": "session=alice"}, {"Cookie": "session=bob"}),
        ({"X-Tenant": "a", "X-Api-Key": "k"}, {"X-Tenant": "b", "x-api-key": "k"}),
    ],
    ids=["x-api-key", "cookie", "any-header"],
)
async def test_a_shared_store_never_serves_a_private_entry_across_credentials(
    alice: dict[str, str], bob: dict[str, str]
) -> None:
    app = make_app()
    store = MemoryCacheStore()  # one store, no principal= given: derived from the requests
    with trio.fail_after(10):
        async with serving(app) as url:
            await private_reads(url, store, alice)
            await private_reads(url, store, bob)  # bob's credential: never alice's entry
            assert app.seen["resources/read"] == 2
            await private_reads(url, store, alice)  # the same credential still hits
            await private_reads(url, store, {k.upper(): v for k, v in bob.items()})
            assert app.seen["resources/read"] == 2


async def test_a_credential_in_the_query_separates_users_too() -> None:
    app = make_app()
    store = MemoryCacheStore()
    with trio.fail_after(10):
        async with serving(app) as url:
            await private_reads(url + "?key=alice", store, {})
            await private_reads(url + "?key=bob", store, {})
            assert app.seen["resources/read"] == 2
            await private_reads(url + "?key=alice", store, {})
            assert app.seen["resources/read"] == 2


async def test_clients_that_set_nothing_keep_their_private_entries_to_themselves() -> None:
    app = make_app()
    store = MemoryCacheStore()
    with trio.fail_after(10):
        async with (
            serving(app) as url,
            open_http_client(url, cache=store) as one,
            open_http_client(url, cache=store) as other,
        ):
            await one.call("resources/read", {"uri": "test://private"})
            await one.call("resources/read", {"uri": "test://private"})  # its own: a hit
            assert app.seen["resources/read"] == 1
            await other.call("resources/read", {"uri": "test://private"})  # not one's
            assert app.seen["resources/read"] == 2
            await one.call("resources/read", {"uri": "test://public"})
            await other.call("resources/read", {"uri": "test://public"})  # public: shared
            assert app.seen["resources/read"] == 3
