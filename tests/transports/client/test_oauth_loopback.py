"""The loopback user agent (``mrtr_transports.client.oauth.loopback``) on real sockets on
127.0.0.1, on trio and asyncio: the callback's answer comes back to the caller, and every
other request (another path or method, a foreign ``Host``, another ``state``, an oversized
or a slow request) is refused while the agent waits on; no answer in time is
``AuthorizationTimedOut``; one listener per flow, on the same port, closed after it."""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlencode

import anyio
import pytest
from mrtr_transports.client.errors import AuthorizationFailed
from mrtr_transports.client.oauth.loopback import (
    MAX_REQUEST_BYTES,
    AuthorizationTimedOut,
    LoopbackUserAgent,
    loopback_user_agent,
)

pytestmark = pytest.mark.anyio

STATE = "state-123"
AUTHORIZE = "https://as.example.test/authorize?" + urlencode(
    {"client_id": "c", "state": STATE, "code_challenge": "x"}
)


async def send_raw(port: int, data: bytes, *, close: bool = True) -> bytes:
    """``data`` to the listener; its whole answer (until it closes the connection)."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(data)
        answer = b""
        with anyio.fail_after(15):
            while True:
                try:
                    answer += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return answer


def get(path: str, port: int, host: str | None = None, method: str = "GET") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


def callback(**params: str) -> str:
    return "/callback?" + urlencode(params)


async def run_flow(
    agent: LoopbackUserAgent, browser: Callable[[int], object], timeout: float = 15
) -> str:
    """The agent waiting for its answer while ``browser(port)`` (async) sends requests."""
    result: list[str] = []
    async with anyio.create_task_group() as group:

        async def wait() -> None:
            result.append(await agent(AUTHORIZE))

        group.start_soon(wait)
        with anyio.fail_after(timeout):
            await browser(agent.port)  # type: ignore[misc]
    return result[0]


async def test_the_callback_s_url_comes_back_and_the_page_is_plain() -> None:
    shown: list[str] = []
    opened: list[str] = []
    async with loopback_user_agent(show=shown.append, open_browser=opened.append) as agent:
        assert agent.redirect_uri == f"http://127.0.0.1:{agent.port}/callback"
        pages: list[bytes] = []

        async def browser(port: int) -> None:
            path = callback(code="the-code", state=STATE, iss="https://as.example.test")
            pages.append(await send_raw(port, get(path, port)))

        url = await run_flow(agent, browser)
        assert url == agent.redirect_uri + "?code=the-code&state=state-123&iss=" + (
            "https%3A%2F%2Fas.example.test"
        )
        assert shown == [AUTHORIZE] and opened == [AUTHORIZE]
        head, _, body = pages[0].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        assert b"content-type: text/plain" in head.lower()
        assert b"you can close this window" in body
        assert b"the-code" not in pages[0]  # (the page never echoes the request)


async def test_an_error_response_is_returned_too_for_the_provider_to_judge() -> None:
    async with loopback_user_agent(show=lambda url: None) as agent:
        pages: list[bytes] = []

        async def browser(port: int) -> None:
            path = callback(error="access_denied", state=STATE)
            pages.append(await send_raw(port, get(path, port)))

        url = await run_flow(agent, browser)
        assert "error=access_denied" in url
        assert b"not granted" in pages[0]


@pytest.mark.parametrize(
    ("request_of", "status"),
    [
        (lambda port: get("/favicon.ico", port), b"404"),
        (lambda port: get(callback(code="c", state=STATE), port, method="POST"), b"405"),
        (lambda port: get(callback(code="c", state=STATE), port, host="evil.example:80"), b"400"),
        (lambda port: get(callback(code="c", state="another"), port), b"400"),
        (lambda port: get(callback(code="c"), port), b"400"),
        (lambda port: b"NOT HTTP AT ALL\r\n\r\n", b"400"),
        (
            lambda port: (
                b"GET /callback?state=x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
                + b"a" * (MAX_REQUEST_BYTES + 10)
                + b"\r\n\r\n"
            ),
            b"431",
        ),
    ],
    ids=["other-path", "post", "foreign-host", "other-state", "no-state", "garbage", "oversized"],
)
async def test_other_requests_are_refused_and_the_agent_waits_on(
    request_of: Callable[[int], bytes], status: bytes
) -> None:
    async with loopback_user_agent(show=lambda url: None) as agent:
        answers: list[bytes] = []

        async def browser(port: int) -> None:
            answers.append(await send_raw(port, request_of(port)))
            answers.append(await send_raw(port, get(callback(code="good", state=STATE), port)))

        url = await run_flow(agent, browser)
        assert answers[0].startswith(b"HTTP/1.1 " + status), answers[0][:80]
        assert "code=good" in url
        assert agent.refused == 1


async def test_a_slow_request_does_not_hold_the_callback() -> None:
    async with loopback_user_agent(show=lambda url: None) as agent:

        async def browser(port: int) -> None:
            # A connection that sends half a request and stalls: the real callback,
            # on another connection, is answered meanwhile.
            async with await anyio.connect_tcp("127.0.0.1", port) as slow:
                await slow.send(b"GET /callback?state=")
                await send_raw(port, get(callback(code="fast", state=STATE), port))

        url = await run_flow(agent, browser, timeout=5)
        assert "code=fast" in url


async def test_no_answer_in_time_is_a_timeout_naming_the_listener() -> None:
    async with loopback_user_agent(show=lambda url: None, timeout=0.3) as agent:
        with anyio.fail_after(10), pytest.raises(AuthorizationTimedOut) as caught:
            await agent(AUTHORIZE)
    assert isinstance(caught.value, AuthorizationFailed)
    assert caught.value.exit_code == 4
    assert agent.redirect_uri in str(caught.value)
    assert STATE not in str(caught.value)


async def test_show_may_refuse_the_url_before_any_browser_opens() -> None:
    opened: list[str] = []

    def refuse(url: str) -> None:
        raise AuthorizationFailed("refused", kind="http")

    async with loopback_user_agent(show=refuse, open_browser=opened.append) as agent:
        with pytest.raises(AuthorizationFailed):
            await agent(AUTHORIZE)
    assert opened == []


async def test_the_listener_is_closed_after_the_block_when_no_flow_ran() -> None:
    async with loopback_user_agent(show=lambda url: None) as agent:
        port = agent.port
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # listening on the loopback before any flow: the port is the redirect's
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


async def test_one_listener_per_flow_nothing_listens_between_flows() -> None:
    async with loopback_user_agent(show=lambda url: None) as agent:

        async def browser(port: int) -> None:
            await send_raw(port, get(callback(code="one", state=STATE), port))

        assert "code=one" in await run_flow(agent, browser)
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", agent.port), 5):
            pass


async def test_a_second_flow_listens_on_the_same_port_with_its_own_state() -> None:
    async with loopback_user_agent(show=lambda url: None) as agent:

        async def first(port: int) -> None:
            await send_raw(port, get(callback(code="one", state=STATE), port))

        assert "code=one" in await run_flow(agent, first)
        second_url = AUTHORIZE.replace(STATE, "state-two")
        result: list[str] = []
        async with anyio.create_task_group() as group:

            async def wait() -> None:
                result.append(await agent(second_url))

            group.start_soon(wait)
            with anyio.fail_after(15):
                while True:  # (the second flow binds the port again: until it listens)
                    try:
                        await (await anyio.connect_tcp("127.0.0.1", agent.port)).aclose()
                        break
                    except OSError:
                        await anyio.sleep(0.01)
                # the first flow's state is no longer the one waited for
                stale = await send_raw(agent.port, get(callback(code="x", state=STATE), agent.port))
                assert stale.startswith(b"HTTP/1.1 400")
                await send_raw(agent.port, get(callback(code="two", state="state-two"), agent.port))
        assert "code=two" in result[0]
