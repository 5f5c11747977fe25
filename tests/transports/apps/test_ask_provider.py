"""``ctx.ask_provider`` leg by leg, without HTTP: the app, its store, the sealed state.

The callback is settled straight through ``app.url_flows.settle`` here (the HTTP
route is tested on a real socket in ``tests/transports/server/test_http_callback.py``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.url_flows import ProviderOutcome, UrlFlows
from test_mcp_app import call, error_of, retry_params

import mrtr_core as m

URL_CAPS = {"elicitation": {"url": {}}}
CALLBACK = "https://mcp.example.com/mcp/auth/callback"
PROVIDER = "https://provider.test/authorize?client_id=c&state=theirs"


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def make_app(clock: Clock, **flows: Any) -> tuple[McpApp, list[ProviderOutcome]]:
    seen: list[ProviderOutcome] = []
    app = McpApp("t", "1", clock=clock, url_flows=UrlFlows(clock=clock, **flows))

    @app.tool("sign_in")
    async def sign_in(ctx: Context) -> Any:
        outcome = await ctx.ask_provider("login", PROVIDER, message="Sign in", state={"n": 7})
        seen.append(outcome)
        if outcome.ask is not None:
            return outcome.ask
        return f"{outcome.status}: {outcome.code}"

    return app, seen


PARAMS = {"name": "sign_in", "arguments": {}}


async def first_leg(app: McpApp) -> tuple[dict[str, Any], str]:
    result = await call(app, "tools/call", PARAMS, capabilities=URL_CAPS)
    assert result["resultType"] == "input_required"
    asked = result["inputRequests"]["login"]
    assert asked["params"]["mode"] == "url"
    return result, asked["params"]["url"]


def callback(url: str, query: str) -> m.server.Callback:
    state = parse_qs(urlsplit(url).query)["state"][0]
    return m.server.read_callback(f"{query}&state={state}")


async def test_pending_then_completed_with_the_handlers_own_state() -> None:
    clock = Clock()
    app, seen = make_app(clock, callback_url=CALLBACK)
    result, url = await first_leg(app)
    assert parse_qs(urlsplit(url).query)["redirect_uri"] == [CALLBACK]
    # Consented, not back yet: a requestState-only round.
    params = retry_params(PARAMS, result, {"login": {"action": "accept"}})
    pending = await call(app, "tools/call", params, capabilities=URL_CAPS, retry=True)
    assert set(pending) >= {"resultType", "requestState"} and "inputRequests" not in pending
    await app.url_flows.settle(callback(url, "code=k-123"), clock.now)
    params = {**PARAMS, "requestState": pending["requestState"]}
    done = await call(app, "tools/call", params, capabilities=URL_CAPS, retry=True)
    assert done["content"][0]["text"] == "completed: k-123"
    assert seen[-1].provider_state == "theirs" and seen[-1].state == {"n": 7}
    assert seen[-1].params == {"code": "k-123"}


async def test_a_declined_consent_forgets_the_interaction() -> None:
    clock = Clock()
    app, seen = make_app(clock, callback_url=CALLBACK)
    result, url = await first_leg(app)
    params = retry_params(PARAMS, result, {"login": {"action": "cancel"}})
    done = await call(app, "tools/call", params, capabilities=URL_CAPS, retry=True)
    assert done["content"][0]["text"] == "declined: None"
    assert seen[-1].error == "cancelled"
    with pytest.raises(m.server.InteractionGone):
        await app.url_flows.settle(callback(url, "code=late"), clock.now)


async def test_an_expired_interaction_is_asked_again_with_a_fresh_url() -> None:
    clock = Clock()
    app, seen = make_app(clock, callback_url=CALLBACK, ttl=30.0)
    result, url = await first_leg(app)
    clock.now += 31
    params = retry_params(PARAMS, result, {"login": {"action": "accept"}})
    again = await call(app, "tools/call", params, capabilities=URL_CAPS, retry=True)
    fresh = again["inputRequests"]["login"]["params"]["url"]
    assert fresh != url
    assert seen[-1].state == {"n": 7}  # the handler's own state survived the restart


async def test_without_an_http_server_there_is_no_callback() -> None:
    app, _ = make_app(Clock())
    error = await error_of(app, "tools/call", PARAMS, capabilities=URL_CAPS)
    assert "no callback endpoint" in error.message


async def test_a_client_without_url_mode_stores_nothing() -> None:
    app, _ = make_app(Clock(), callback_url=CALLBACK)
    error = await error_of(app, "tools/call", PARAMS, capabilities={"elicitation": {}})
    assert error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
    assert len(app.url_flows.store) == 0  # type: ignore[arg-type]


async def test_a_continuation_cannot_ask_a_provider() -> None:
    app = McpApp("t", "1", url_flows=UrlFlows(callback_url=CALLBACK))

    @app.tool("bad", continuation=True)
    async def bad(ctx: Context) -> Any:
        await ctx.ask_provider("login", PROVIDER, message="Sign in")

    result = await call(app, "tools/call", {"name": "bad", "arguments": {}}, capabilities=URL_CAPS)
    assert result.get("isError") and "re-entrant" in result["content"][0]["text"]


def test_the_lifetime_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ttl"):
        UrlFlows(ttl=0)
