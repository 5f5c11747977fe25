"""The app leg's shortcuts keep its meaning: the Context takes over the opened leg
(its spend, its proof rule, its answers) instead of being built twice, plain results
skip the awaitable check, and mappings that are not dicts still pass the checks."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from mrtr_transports.apps.mcp_app import Context, McpApp
from test_mcp_app import NAME, call, retry_params

import mrtr_core as m


async def test_the_context_is_the_opened_leg_spent_before_the_handler() -> None:
    app = McpApp("x", "1")
    seen: list[tuple[Any, ...]] = []

    @app.tool("ask", require_proof=True)
    def ask(ctx: Context) -> Any:
        seen.append((ctx.to_spend, ctx.answers.require_proof, ctx.state, ctx.flow))
        reply = ctx.answer("name", NAME)
        if reply is None:
            return ctx.ask({"name": NAME}, state="asked")
        return "done"

    params = {"name": "ask", "arguments": {}}
    first = await call(app, "tools/call", params)
    answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    second = await call(app, "tools/call", retry_params(params, first, answer))
    assert second == {"content": [{"type": "text", "text": "done"}]}
    (spent0, proof0, state0, flow0), (spent1, proof1, state1, flow1) = seen
    assert spent0 is None and spent1 is None  # nothing to spend, then spent already
    assert proof0 is proof1 is True
    assert (state0, state1) == (None, "asked") and flow0 == flow1
    # The spent state cannot be redeemed again.
    error = await _error(app, retry_params(params, first, answer))
    assert error.data == {"reason": "replayed"}


async def _error(app: McpApp, params: dict[str, Any]) -> m.MrtrError:
    try:
        await call(app, "tools/call", params)
    except m.MrtrError as exc:
        return exc
    raise AssertionError("no error")


class Later:
    """Awaitable, yet no coroutine: still awaited."""

    def __await__(self) -> Any:
        yield from ()
        return "later"


async def test_results_that_are_awaitable_in_other_ways_are_still_awaited() -> None:
    app = McpApp("x", "1")
    app.tool("later")(lambda ctx: Later())

    async def coroutine(ctx: Context) -> str:
        return "coroutine"

    app.tool("coroutine")(coroutine)
    assert await call(app, "tools/call", {"name": "later"}) == {
        "content": [{"type": "text", "text": "later"}]
    }
    assert await call(app, "tools/call", {"name": "coroutine"}) == {
        "content": [{"type": "text", "text": "coroutine"}]
    }


async def test_mappings_that_are_not_dicts_pass_the_leg_checks() -> None:
    app = McpApp("x", "1")

    @app.tool("echo")
    def echo(ctx: Context) -> Any:
        reply = ctx.answer("name", NAME)
        return {"content": [], "args": dict(ctx.arguments), "action": reply and reply.action}

    params = {
        "name": "echo",
        "arguments": {"a": 1},
        "inputResponses": MappingProxyType({"name": {"action": "decline"}}),
    }
    result = await call(app, "tools/call", params)
    assert result == {"content": [], "args": {"a": 1}, "action": "decline"}
    bad = await _error(app, {"name": "echo", "arguments": ["a"]})
    assert bad.code == m.ErrorCode.INVALID_PARAMS
