"""URL elicitation end to end: a real server, a real client, the test as the browser.

``mrtr serve --http`` (a subprocess), and ``McpAsgi`` under uvicorn (a subprocess), serve
the example app's ``connect_provider`` tool; the project's client calls it and
answers its URL elicitation; the test plays the browser the provider redirects: it
reads ``redirect_uri`` and ``state`` from the URL shown and GETs the callback with a
``code`` (or an ``error``).  The tests that need a short lifetime or a small bound
serve an app of their own in-process, on a real socket: ``HttpServer`` (``mrtr serve --http``), and
``McpAsgi`` under hypercorn's trio worker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import trio
from mrtr_transports.apps import example_auth
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.url_flows import MemoryInteractionStore, UrlFlows
from mrtr_transports.cli import serve
from mrtr_transports.cli.serve_options import DEFAULT_APP
from mrtr_transports.client.errors import CallError, CallTimeout
from mrtr_transports.client.http import open_http_client
from mrtr_transports.server.http import HttpServer
from support.asgi_hosts import HYPERCORN, UVICORN, hypercorn_serving, uvicorn_serving
from support.url_browser import Page, browse, callback_of, mrtr_serve_http

import mrtr_core as m

pytestmark = pytest.mark.subprocess

URL_CAPS = {"elicitation": {"form": {}, "url": {}}}


# --- the browser ------------------------------------------------------------------------


class Browser:
    """The client's URL-elicitation answer: records each URL, consents, then (in the
    background, after ``delay``) follows the provider's redirect with ``params``."""

    def __init__(
        self, nursery: trio.Nursery, *, action: str = "accept", delay: float = 0.0, **params: str
    ) -> None:
        self.nursery = nursery
        self.action = action
        self.delay = delay
        self.params = params or {"code": "c0de-XYZW"}
        self.urls: list[str] = []
        self.pages: list[Page] = []
        self.follow = True

    async def __call__(self, key: str, request: m.wire.InputRequest) -> Any:
        assert isinstance(request, m.wire.ElicitUrlRequest)
        self.urls.append(request.url)
        if self.action == "accept" and self.follow:
            self.nursery.start_soon(self._come_back, request.url)
        return m.wire.ElicitResult(action=self.action)  # type: ignore[arg-type]

    async def _come_back(self, url: str) -> None:
        await trio.sleep(self.delay)
        self.pages.append(await browse(callback_of(url, **self.params)))


def text_of(result: Mapping[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result["content"])


# --- a real `mrtr serve --http` ---------------------------------------------------------


@pytest.fixture(params=["mrtr-serve", UVICORN])
async def served(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    if request.param == UVICORN:
        async with uvicorn_serving(DEFAULT_APP) as (_, host, port):
            yield f"http://{host}:{port}/mcp"
        return
    async with mrtr_serve_http() as url:
        yield url


async def test_the_provider_redirect_completes_the_call(served: str) -> None:
    async with trio.open_nursery() as nursery:
        browser = Browser(nursery, delay=0.8)  # the person takes a while in the browser
        async with open_http_client(served, answer=browser, capabilities=URL_CAPS) as client:
            # The polls while the person is away are not server time: one allowed is plenty.
            result = await client.call_tool("connect_provider", timeout=30, max_state_only_legs=1)
    assert not result.get("isError"), result
    assert "'XYZW'" in text_of(result) and "'demo-state'" in text_of(result)
    (shown,) = browser.urls
    parts = urlsplit(shown)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "provider.example", "/authorize")
    query = parse_qs(parts.query)
    assert query["client_id"] == ["mrtr-example"] and query["scope"] == ["read"]
    assert query["redirect_uri"] == [served + "/auth/callback"]
    prefix, _, original = query["state"][0].partition(".")
    assert len(prefix) == 32 and original == "demo-state"
    (page,) = browser.pages
    assert page.status == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["cache-control"] == "no-store"
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'none'
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["referrer-policy"] == "no-referrer"
    assert b"close this window" in page.body
    # Nothing from the query is echoed: neither the code nor the state.
    assert b"XYZW" not in page.body and prefix.encode() not in page.body
    # The same redirect again (a replay, a reload): gone.
    replay = await browse(callback_of(shown, code="c0de-XYZW"))
    assert replay.status == 410 and b"expired or was already used" in replay.body


async def test_the_wait_for_a_person_is_bounded_by_url_wait_timeout(served: str) -> None:
    # The person consents but never comes back from the provider: the client stops
    # polling after url_wait_timeout, not after max_state_only_legs or the call's timeout.
    async with trio.open_nursery() as nursery:
        browser = Browser(nursery)
        browser.follow = False
        async with open_http_client(served, answer=browser, capabilities=URL_CAPS) as client:
            started = trio.current_time()
            with pytest.raises(CallTimeout) as caught:
                await client.call_tool(
                    "connect_provider", timeout=60, max_state_only_legs=1, url_wait_timeout=1.0
                )
    assert caught.value.limit == "input" and caught.value.budget == 1.0
    assert trio.current_time() - started < 30
    assert len(browser.urls) == 1


async def test_access_denied_at_the_provider_is_a_declined_sign_in(served: str) -> None:
    async with trio.open_nursery() as nursery:
        browser = Browser(nursery, error="access_denied")
        async with open_http_client(served, answer=browser, capabilities=URL_CAPS) as client:
            result = await client.call_tool("connect_provider", timeout=30)
    assert result["isError"] is True
    assert "declined at the provider" in text_of(result)
    assert browser.pages[0].status == 200 and b"declined" in browser.pages[0].body


async def test_another_provider_error_fails_the_sign_in(served: str) -> None:
    async with trio.open_nursery() as nursery:
        browser = Browser(nursery, error="server_error")
        async with open_http_client(served, answer=browser, capabilities=URL_CAPS) as client:
            result = await client.call_tool("connect_provider", timeout=30)
    assert result["isError"] is True and "server_error" in text_of(result)


async def test_refusing_to_open_the_url_is_a_declined_sign_in(served: str) -> None:
    async with trio.open_nursery() as nursery:
        browser = Browser(nursery, action="decline")
        async with open_http_client(served, answer=browser, capabilities=URL_CAPS) as client:
            result = await client.call_tool("connect_provider", timeout=30)
        # The interaction was forgotten: its URL's callback is gone.
        late = await browse(callback_of(browser.urls[0], code="x"))
    assert result["isError"] is True and "did not consent" in text_of(result)
    assert late.status == 410


async def test_a_client_without_url_elicitation_is_told_what_is_missing(served: str) -> None:
    async def never(key: str, request: m.wire.InputRequest) -> Any:
        raise AssertionError("not asked")

    caps = {"elicitation": {"form": {}}}
    async with open_http_client(served, answer=never, capabilities=caps) as client:
        with pytest.raises(CallError) as caught:
            await client.call_tool("connect_provider", timeout=30)
    assert caught.value.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY


async def test_what_is_not_a_pending_callback(served: str) -> None:
    callback = served + "/auth/callback"
    unknown = await browse(callback + "?" + urlencode({"code": "1", "state": "A" * 32}))
    assert unknown.status == 410
    # A state we could never have issued is just as unknown (the issue's own probe).
    foreign = await browse(callback + "?" + urlencode({"code": "1", "state": "nope"}))
    assert foreign.status == 410
    assert unknown.headers["content-type"] == "text/html; charset=utf-8"
    bad = await browse(callback + "?code=1")  # no state
    assert bad.status == 400 and b"code=1" not in bad.body
    hostile = "<script>alert(1)</script>"
    echoed = await browse(callback + "?" + urlencode({"code": hostile, "state": hostile}))
    assert echoed.status == 410 and b"<script>" not in echoed.body
    too_long = await browse(
        callback + "?code=" + "x" * (m.server._url_flows.MAX_CALLBACK_QUERY + 1)
    )
    assert too_long.status == 414
    posted = await browse(callback + "?code=1&state=" + "A" * 32, method="POST")
    assert posted.status == 405 and posted.headers["allow"] == "GET"
    # A navigation from the provider's site: its Origin is not a reason to refuse.
    cross_site = await browse(
        callback + "?" + urlencode({"code": "1", "state": "B" * 32}),
        headers={"origin": "https://provider.example", "sec-fetch-site": "cross-site"},
    )
    assert cross_site.status == 410
    # A Host the server does not answer to (DNS rebinding) is refused, as on the endpoint.
    rebound = await browse(callback + "?code=1&state=" + "A" * 32, headers={"host": "evil.test"})
    assert rebound.status == 403
    # Beside the endpoint, nothing else is served.
    assert (await browse(served + "/auth/other")).status == 404


# --- in-process: a short lifetime, a small bound ----------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


#: The in-process servers of the endpoint.
IN_PROCESS = pytest.mark.parametrize("kind", ["mrtr", HYPERCORN])


@asynccontextmanager
async def app_served(kind: str, app: McpApp, **options: Any) -> AsyncIterator[str]:
    if kind == HYPERCORN:
        async with hypercorn_serving(app, **options) as (_, host, port):
            yield f"http://{host}:{port}/mcp"
        return
    server = HttpServer(app, **options)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        try:
            yield f"http://{host}:{port}/mcp"
        finally:
            await server.aclose(grace=1.0)


def provider_app(clock: Callable[[], float], **flows: Any) -> McpApp:
    app = McpApp("providers", "1", clock=clock, url_flows=UrlFlows(clock=clock, **flows))
    app.add_tool(example_auth.connect_provider, "connect_provider")
    return app


@IN_PROCESS
async def test_an_expired_interaction_is_gone_and_the_tool_asks_again(kind: str) -> None:
    clock = Clock()
    app = provider_app(clock, ttl=60.0)
    async with app_served(kind, app) as url, trio.open_nursery() as nursery:
        browser = Browser(nursery)
        browser.follow = False  # the person wanders off
        async with (
            open_http_client(url, answer=browser, capabilities=URL_CAPS) as client,
            trio.open_nursery() as calls,
        ):
            outcome: list[dict[str, Any]] = []

            async def call() -> None:
                outcome.append(await client.call_tool("connect_provider", timeout=30))

            calls.start_soon(call)
            with trio.fail_after(10):
                while not browser.urls:
                    await trio.sleep(0.01)
            first = browser.urls[0]
            browser.follow = True  # asked again with a fresh URL, they will finish
            clock.now += 61  # past the interaction's lifetime
            late = await browse(callback_of(first, code="late"))
            assert late.status == 410
            with trio.fail_after(10):
                while len(browser.urls) < 2:
                    await trio.sleep(0.01)
        assert browser.urls[1] != first
        assert "'late'" not in text_of(outcome[0]) and "'XYZW'" in text_of(outcome[0])


@IN_PROCESS
async def test_pending_interactions_are_bounded(kind: str) -> None:
    clock = Clock()
    store = MemoryInteractionStore(max_entries=2)
    app = provider_app(clock, store=store)
    async with app_served(kind, app) as url, trio.open_nursery() as nursery:
        browser = Browser(nursery)
        browser.follow = False
        async with (
            open_http_client(url, answer=browser, capabilities=URL_CAPS) as client,
            trio.open_nursery() as calls,
        ):
            for _ in range(2):
                calls.start_soon(client.call_tool, "connect_provider")
            with trio.fail_after(10):
                while len(browser.urls) < 2:
                    await trio.sleep(0.01)
            # (Issue 22: the refusal names the bound it met, here the client's share.)
            with pytest.raises(CallError, match="2 pending URL interactions") as caught:
                await client.call_tool("connect_provider", timeout=30)
            assert caught.value.code == -32000
            # Once one finishes, there is room again.
            await browse(callback_of(browser.urls[0], code="done"))
            with trio.fail_after(10):
                while len(store) > 1:  # the first call read its outcome
                    await trio.sleep(0.01)
            browser.follow = True
            result = await client.call_tool("connect_provider", timeout=30)
            assert not result.get("isError"), result
            calls.cancel_scope.cancel()


@IN_PROCESS
async def test_the_public_url_names_the_callback_and_its_host_is_allowed(kind: str) -> None:
    clock = Clock()
    app = provider_app(clock)
    public = "https://mcp.example.com/mcp"
    async with app_served(kind, app, public_url=public) as url, trio.open_nursery() as nursery:
        browser = Browser(nursery)
        browser.follow = False
        async with open_http_client(url, answer=browser, capabilities=URL_CAPS) as client:
            with trio.move_on_after(2):  # nobody finishes: the call only waits
                await client.call_tool("connect_provider")
        (shown,) = browser.urls
        query = parse_qs(urlsplit(shown).query)
        assert query["redirect_uri"] == ["https://mcp.example.com/mcp/auth/callback"]
        # The proxy forwards the browser's request with the public Host: accepted.
        local = url + "/auth/callback?" + urlencode({"code": "1", "state": query["state"][0]})
        page = await browse(local, headers={"host": "mcp.example.com"})
        assert page.status == 200


async def test_mrtr_serve_takes_the_public_url_and_the_callback_path() -> None:
    flags = ["--public-url", "https://mcp.example.com/", "--callback-path", "oauth/back"]
    async with mrtr_serve_http(*flags) as url, trio.open_nursery() as nursery:
        browser = Browser(nursery)
        browser.follow = False
        async with open_http_client(url, answer=browser, capabilities=URL_CAPS) as client:
            with trio.move_on_after(2):
                await client.call_tool("connect_provider")
        query = parse_qs(urlsplit(browser.urls[0]).query)
        assert query["redirect_uri"] == ["https://mcp.example.com/mcp/oauth/back"]
        back = url + "/oauth/back?" + urlencode({"code": "1", "state": query["state"][0]})
        assert (await browse(back, headers={"host": "mcp.example.com"})).status == 200
        assert (await browse(url + "/auth/callback?code=1")).status == 404


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--stdio", "--public-url", "https://mcp.example.com"], "only apply to --http"),
        (["--callback-path", "back"], "only apply to --http"),
        (["--http", "127.0.0.1:0", "--public-url", "mcp.example.com"], "--public-url"),
    ],
)
def test_callback_options_that_do_not_fit_are_usage_errors(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve.main(argv) == 2
    assert words in capsys.readouterr().err


class BrokenStore(MemoryInteractionStore):
    """A shared store that cannot be reached when the browser comes back."""

    async def settle(self, callback: m.server.Callback, now: float) -> m.server.Interaction:
        raise m.MrtrError("the store is unreachable")


@IN_PROCESS
async def test_a_store_that_cannot_answer_is_a_503_and_the_interaction_stays_pending(
    kind: str,
) -> None:
    clock = Clock()
    store = BrokenStore()
    app = provider_app(clock, store=store)
    async with app_served(kind, app) as url, trio.open_nursery() as nursery:
        browser = Browser(nursery)
        browser.follow = False
        async with open_http_client(url, answer=browser, capabilities=URL_CAPS) as client:
            with trio.move_on_after(1):
                await client.call_tool("connect_provider")
        page = await browse(callback_of(browser.urls[0], code="1"))
        assert page.status == 503 and page.headers["retry-after"] == "5"
        prefix = parse_qs(urlsplit(browser.urls[0]).query)["state"][0].partition(".")[0]
        pending = await store.get(prefix, clock.now)
        assert pending is not None and pending.status is m.server.InteractionStatus.PENDING
