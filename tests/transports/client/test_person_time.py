"""The person's time is not the server's (``client/person_time.py``): the client's
timers stop while the OAuth provider's user agent (a person signing in) works, and
start again whole after; a sign-in longer than the handshake's bound or a leg's no
longer times them out."""

from __future__ import annotations

import pytest
import support.peer_http_server as peer
import trio
import trio.testing
from mrtr_transports.client.errors import CallTimeout
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.oauth import OAuthProvider, headless_user_agent
from mrtr_transports.client.person_time import PersonTime, server_sleep
from test_oauth_provider import (
    REDIRECT,
    Reply,
    guarded,
    guarded_mcp,
    json_reply,
    oauth_server,
    serving,
)


async def test_a_sleep_counts_only_time_no_person_works(
    autojump_clock: trio.testing.MockClock,
) -> None:
    person = PersonTime()

    async def signing_in() -> None:
        await trio.sleep(1)
        with person.at_work(), person.at_work():  # (nested: one stretch of work)
            assert person.working
            await trio.sleep(10)
        assert not person.working

    async with trio.open_nursery() as nursery:
        nursery.start_soon(signing_in)
        started = trio.current_time()
        await person.server_sleep(3)
        # 1 s of the server's time, then the person's 10 s, then 3 s whole again
        assert trio.current_time() - started == pytest.approx(14)


async def test_a_person_already_at_work_delays_the_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    person = PersonTime()
    started = trio.current_time()
    async with trio.open_nursery() as nursery:

        async def working() -> None:
            with person.at_work():
                await trio.sleep(5)

        nursery.start_soon(working)
        await trio.sleep(0)
        await server_sleep(person, 2)
    assert trio.current_time() - started == pytest.approx(7)
    await server_sleep(None, 2)  # no person: a plain sleep
    assert trio.current_time() - started == pytest.approx(9)


def slow_person(seconds: float):
    async def user_agent(url: str) -> str:
        await trio.sleep(seconds)  # (typing a password)
        return await headless_user_agent(url)

    return user_agent


async def test_a_sign_in_longer_than_the_bounds_times_nothing_out() -> None:
    with trio.fail_after(20):
        async with guarded() as (_, _, url):
            auth = OAuthProvider(url, user_agent=slow_person(1.0), redirect_uri=REDIRECT)
            # the handshake's sign-in (401) and the call's step-up (403) each take the
            # person 1 s, past the 0.4 s the server has for each
            async with open_http_client(url, auth=auth, handshake_timeout=0.4) as client:
                answer = await client.call_tool("t", {}, leg_timeout=0.4)
            assert answer["content"][0]["text"] == "access-2"
            assert auth.authorizations == 2


async def test_the_servers_own_silence_still_times_out() -> None:
    # a person's time is taken out of the bounds, the server's still counts: a
    # tools/list the endpoint holds open (a plain request) times out after the sign-in
    oauth = oauth_server()
    guard = guarded_mcp(oauth)

    async def holds_tools_list(seen: peer.Seen) -> peer.Reply:
        if seen.rpc_method == "tools/list" and seen.headers.get("authorization"):
            return peer.sse_reply([], hold=True)
        return await guard(seen)

    mcp = peer.PeerHttpServer(holds_tools_list)
    with trio.fail_after(20):
        async with serving(oauth), trio.open_nursery() as nursery:
            url = await nursery.start(mcp.run)
            prm = {"resource": url, "authorization_servers": [oauth.base]}
            oauth.routes["/.well-known/oauth-protected-resource/mcp"] = lambda _: json_value(prm)
            auth = OAuthProvider(url, user_agent=slow_person(0.5), redirect_uri=REDIRECT)
            async with open_http_client(url, auth=auth, handshake_timeout=0.4) as client:
                started = trio.current_time()
                with pytest.raises(CallTimeout):
                    await client.list_tools(timeout=0.4)
                assert trio.current_time() - started < 5
            assert auth.authorizations == 1
            nursery.cancel_scope.cancel()


async def json_value(value: object) -> Reply:
    return json_reply(value)
