"""Each client's share of an app's shared stores (issue 22, item 6), over real HTTP sockets.

The attack: one client filled the pending URL interactions (every other client's
``connect_provider`` then got -32603 for as long as they lived), or the single-use
store with two-leg ``deploy`` flows (every state-redeeming leg then failed for
everyone).  Scaled down here: stores of tens, shares of two or three.  Each test
serves an app on ``HttpServer`` (127.0.0.1) behind a "proxy" it trusts, so that two
clients are two ``X-Forwarded-For`` addresses, as the endpoint's ``client_of`` reads
them (the share is keyed by ``client_key``); the project's HTTP client drives the
flows.  Checked for each store: one client reaches its share and gets -32000 naming
the bound, another client's flow still completes, and the first client's share frees
once its entries are spent or expire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from mrtr_transports.apps import example as example_app
from mrtr_transports.apps import example_auth
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.continuations import ContinuationStore
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.single_use import MemorySingleUse
from mrtr_transports.apps.url_flows import MemoryInteractionStore, UrlFlows
from mrtr_transports.client.errors import CallError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.ws import open_ws_client
from mrtr_transports.server.http import HttpServer
from mrtr_transports.server.ws import WsServer
from support.url_browser import browse, callback_of

import mrtr_core as m

URL_CAPS = {"elicitation": {"form": {}, "url": {}}}
FORM_CAPS = {"elicitation": {"form": {}}}
ONE, TWO = {"X-Forwarded-For": "203.0.113.1"}, {"X-Forwarded-For": "203.0.113.2"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def served(app: McpApp) -> AsyncIterator[str]:
    server = HttpServer(app, trusted_proxies=["127.0.0.1"])
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        try:
            yield f"http://{host}:{port}/mcp"
        finally:
            await server.aclose(grace=1.0)


def text_of(result: Mapping[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result["content"])


# --- the single-use store: two-leg deploy flows ------------------------------------------------


async def confirm(key: str, request: m.wire.InputRequest) -> Any:
    return m.wire.ElicitResult(action="accept", content={"confirm": True})


async def test_one_client_fills_its_share_of_the_single_use_store_not_the_store() -> None:
    # Before (issue 22): with max_entries=6 the first client's 6 flows filled the store
    # and the other client's redeeming leg got -32603; now the first stops at its 3.
    clock = Clock()
    store = MemorySingleUse(max_entries=6, max_per_client=3)
    app = McpApp("deployer", "1.0", clock=clock, single_use=store)
    app.add_tool(example_app.deploy, input_schema={"type": "object"}, require_proof=True)
    before = len(example_app.deployments)
    async with (
        served(app) as url,
        open_http_client(url, answer=confirm, capabilities=FORM_CAPS, headers=ONE) as one,
        open_http_client(url, answer=confirm, capabilities=FORM_CAPS, headers=TWO) as two,
    ):
        for _ in range(3):
            done = await one.call_tool("deploy", {"env": "one"}, timeout=10)
            assert text_of(done) == "Deployed to one."
        with pytest.raises(CallError) as caught:
            await one.call_tool("deploy", {"env": "one"}, timeout=10)
        assert caught.value.code == -32000
        assert "single-use max_per_client=3" in caught.value.message
        assert caught.value.data == {"reason": "own_share"}
        # The other client is unaffected.
        assert text_of(await two.call_tool("deploy", {"env": "two"}, timeout=10)) == (
            "Deployed to two."
        )
        assert store.shares.held_by("peer:203.0.113.1") == 3
        # Once its spent states expire, the first client's share is free again.
        clock.now += app.flow_ttl + 1
        assert text_of(await one.call_tool("deploy", {"env": "one"}, timeout=10)) == (
            "Deployed to one."
        )
        assert store.shares.held_by("peer:203.0.113.1") == 1
    assert example_app.deployments[before:] == ["one"] * 3 + ["two", "one"]


# --- pending URL interactions ----------------------------------------------------------


class Browser:
    """The client's URL-elicitation answer: records each URL, consents, and follows
    the provider's redirect at once when ``follow``."""

    def __init__(self, nursery: trio.Nursery, *, follow: bool) -> None:
        self.nursery = nursery
        self.follow = follow
        self.urls: list[str] = []

    async def __call__(self, key: str, request: m.wire.InputRequest) -> Any:
        assert isinstance(request, m.wire.ElicitUrlRequest)
        self.urls.append(request.url)
        if self.follow:
            self.nursery.start_soon(browse, callback_of(request.url, code="c0de-XYZW"))
        return m.wire.ElicitResult(action="accept")


async def test_one_client_fills_its_share_of_pending_url_interactions_not_the_store() -> None:
    # Before (issue 22): with max_entries=4 the first client's 4 pending sign-ins filled
    # the store and the other client's connect_provider got -32603 until they expired.
    clock = Clock()
    store = MemoryInteractionStore(max_entries=4, max_per_client=2)
    app = McpApp("providers", "1", clock=clock, url_flows=UrlFlows(store, clock=clock, ttl=60.0))
    app.add_tool(example_auth.connect_provider, "connect_provider")
    async with served(app) as url, trio.open_nursery() as nursery:
        away = Browser(nursery, follow=False)  # the first client's person never comes back
        there = Browser(nursery, follow=True)
        async with (
            open_http_client(url, answer=away, capabilities=URL_CAPS, headers=ONE) as one,
            open_http_client(url, answer=there, capabilities=URL_CAPS, headers=TWO) as two,
            trio.open_nursery() as calls,
        ):
            for _ in range(2):
                calls.start_soon(lambda: one.call_tool("connect_provider", timeout=60))
            with trio.fail_after(10):
                while len(away.urls) < 2:
                    await trio.sleep(0.01)
            with pytest.raises(CallError) as caught:
                await one.call_tool("connect_provider", timeout=30)
            assert caught.value.code == -32000
            assert "interactions max_per_client=2" in caught.value.message
            assert len(store) == 2
            # The other client's sign-in completes.
            result = await two.call_tool("connect_provider", timeout=30)
            assert not result.get("isError") and "'XYZW'" in text_of(result), result
            # One of the first client's sign-ins completes: its place is free again ...
            await browse(callback_of(away.urls[0], code="done"))
            with trio.fail_after(10):
                while store.shares.held_by("peer:203.0.113.1") > 1:
                    await trio.sleep(0.01)
            away.urls.clear()
            calls.start_soon(lambda: one.call_tool("connect_provider", timeout=60))
            with trio.fail_after(10):
                while not away.urls:
                    await trio.sleep(0.01)
            assert store.shares.held_by("peer:203.0.113.1") == 2
            # ... and so are those that expire unfinished (once the client stops polling:
            # a poll that finds its interaction expired begins a fresh one).
            calls.cancel_scope.cancel()
        clock.now += 61
        async with open_http_client(
            url, answer=there, capabilities=URL_CAPS, headers=TWO
        ) as two:  # its register sweeps the expired
            another = await two.call_tool("connect_provider", timeout=30)
            assert not another.get("isError"), another
        assert store.shares.held_by("peer:203.0.113.1") == 0


# --- parked continuations ----------------------------------------------------------------


async def test_one_client_fills_its_share_of_parked_continuations_not_the_store() -> None:
    app = McpApp(
        "parking", "1", continuations=ContinuationStore(max_parked=4, max_parked_per_client=2)
    )

    @app.tool(continuation=True)
    async def ask_city(ctx: Context) -> str:
        answer = await ctx.wait_for_answer(
            "city", m.server.elicit_form("City?", {"city": {"type": "string"}})
        )
        assert isinstance(answer, m.wire.ElicitResult) and answer.content is not None
        return f"city: {answer.content['city']}"

    release = trio.Event()

    async def slow(key: str, request: m.wire.InputRequest) -> Any:
        await release.wait()  # the person takes their time: the handler stays parked
        return m.wire.ElicitResult(action="accept", content={"city": "Oslo"})

    async def quick(key: str, request: m.wire.InputRequest) -> Any:
        return m.wire.ElicitResult(action="accept", content={"city": "Bergen"})

    store = app.continuations
    assert store is not None
    async with (
        served(app) as url,
        open_http_client(url, answer=slow, capabilities=FORM_CAPS, headers=ONE) as one,
        open_http_client(url, answer=quick, capabilities=FORM_CAPS, headers=TWO) as two,
        trio.open_nursery() as calls,
    ):
        done: list[str] = []

        async def park() -> None:
            done.append(text_of(await one.call_tool("ask_city", timeout=60)))

        for _ in range(2):
            calls.start_soon(park)
        with trio.fail_after(10):
            while len(store) < 2:
                await trio.sleep(0.01)
        with pytest.raises(CallError) as caught:
            await one.call_tool("ask_city", timeout=30)
        assert caught.value.code == -32000
        assert "max_parked_per_client=2" in caught.value.message
        assert text_of(await two.call_tool("ask_city", timeout=30)) == "city: Bergen"
        # The parked flows finish: the first client's share is free again.
        release.set()
        with trio.fail_after(10):
            while len(done) < 2:
                await trio.sleep(0.01)
        assert done == ["city: Oslo"] * 2
        assert store.shares.held_by("peer:203.0.113.1") == 0
        assert text_of(await one.call_tool("ask_city", timeout=30)) == "city: Oslo"


# --- listen streams over WebSocket (no endpoint listen pool in front) --------------------


async def test_one_client_fills_its_share_of_listen_streams_not_the_apps() -> None:
    app = McpApp("listening", "1", max_subscriptions=10, max_subscriptions_per_client=2)

    @app.tool()
    def echo(ctx: Context) -> str:
        return "echo"

    server = WsServer(app, trusted_proxies=["127.0.0.1"])
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve)
        url = f"ws://{host}:{port}/mcp"
        async with (
            open_ws_client(url, headers=ONE) as one,
            open_ws_client(url, headers=TWO) as two,
            one.listen(tools=True, reopen=False),
            one.listen(tools=True, reopen=False),
        ):
            assert app.subscription_count == 2
            with pytest.raises(CallError) as caught:
                async with one.listen(tools=True, reopen=False, ack_timeout=5):
                    raise AssertionError("a third stream of one client was acknowledged")
            assert caught.value.code == -32000
            assert "max_subscriptions_per_client=2" in caught.value.message
            async with two.listen(tools=True, reopen=False) as sub:
                assert sub.acknowledged == {"toolsListChanged": True}
        with trio.fail_after(5):
            while app.subscription_count:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()


async def test_a_2025_session_counts_against_the_client_that_posted_it() -> None:
    # A 2025-era session's requests run in the session's task group, started from the
    # POST that carried each one: they see that POST's client, not a shared default.
    store = MemorySingleUse(max_entries=6, max_per_client=3)
    app = McpApp("deployer", "1.0", single_use=store)
    app.add_tool(example_app.deploy, input_schema={"type": "object"}, require_proof=True)
    async with (
        served(app) as url,
        open_http_client(
            url, answer=confirm, capabilities=FORM_CAPS, headers=ONE, era="legacy"
        ) as one,
    ):
        assert one.era == "legacy"
        done = await one.call_tool("deploy", {"env": "legacy"}, timeout=10)
        assert text_of(done) == "Deployed to legacy."
    assert store.shares.held_by("peer:203.0.113.1") == 1
