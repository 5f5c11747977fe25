"""The continuation style: handlers that really suspend between rounds, hosted by ``McpApp``.

A handler registered with ``continuation=True`` awaits ``ctx.wait_for(...)``;
the app parks it in its ``ContinuationStore`` (trio system tasks; MockClock for
the idle timeout).  Most tests call ``app.handle`` leg by leg; some run a
client ``Connection`` (``serve_call``) or a 2025-era client through the shim.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio
import trio.testing
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.continuations import ContinuationStore, TooManyParked
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.client.http import open_http_client
from mrtr_transports.server.http import HttpServer
from support.pairing import drain
from test_example_app import serve_legacy_call
from test_mcp_app import RecordingOutlet, accept, serve_call

import mrtr_core as m

CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = m.server.elicit_form("Units?", {"units": {"type": "string"}})
TONE = m.server.sample("Three words for sunshine", max_tokens=10)
ANSWERS: dict[str, Any] = {
    "city": {"action": "accept", "content": {"city": "Oslo"}},
    "units": {"action": "accept", "content": {"units": "C"}},
    "tone": {"role": "assistant", "content": {"type": "text", "text": "warm"}, "model": "x"},
}
CAPS = {"elicitation": {}, "sampling": {}}
PARAMS = {"name": "weather", "arguments": {}}


def info(capabilities: Any = CAPS, method: str = "tools/call") -> m.server.RequestInfo:
    return m.server.RequestInfo(
        id=1,
        method=method,
        era="modern",
        protocol_version="2026-07-28",
        capabilities=capabilities,
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )


def sealer() -> m.server.StateSealer:
    return m.server.StateSealer({"k": b"k" * 32}, "k")


def weather(log: list[str]) -> Any:
    async def handler(ctx: Context) -> dict[str, Any]:
        log.append("started")  # runs once: the coroutine is resumed, not re-run
        try:
            city = await ctx.wait_for_answer("city", CITY)
            units = await ctx.wait_for_answer("units", UNITS)
            tone = await ctx.wait_for_answer("tone", TONE)
        except trio.Cancelled:
            log.append("cancelled")
            raise
        text = f"{city.content['city']}: 21 {units.content['units']}, {tone.content['text']}"  # type: ignore[union-attr]
        log.append("done")
        return {"content": [{"type": "text", "text": text}]}

    return handler


def app_with(handler: Any, *, name: str = "weather", **options: Any) -> McpApp:
    """An app whose one tool ``name`` is ``handler``, in the continuation style."""
    app = McpApp("continuations", "1.0", principal="ada", sealer=sealer(), **options)
    app.add_tool(handler, name, continuation=True)
    return app


def store_of(app: McpApp) -> ContinuationStore:
    assert app.continuations is not None
    return app.continuations


async def leg(
    app: McpApp, params: Any, caps: Any = CAPS, outlet: RecordingOutlet | None = None
) -> Any:
    request = m.Request(id=1, method="tools/call", params=params)
    return dict(await app.handle(request, info(caps), outlet or RecordingOutlet()))


def retry_of(result: Any, answers: Any = ANSWERS, params: Any = PARAMS) -> dict[str, Any]:
    keys = result["inputRequests"]
    return {
        **params,
        "requestState": result["requestState"],
        "inputResponses": {key: answers[key] for key in keys},
    }


async def test_a_three_round_flow_suspends_one_coroutine() -> None:
    log: list[str] = []
    app = app_with(weather(log))
    store = store_of(app)
    result = await leg(app, PARAMS)
    rounds = 0
    while result.get("resultType") == "input_required":
        rounds += 1
        assert len(store) == 1  # parked between rounds
        result = await leg(app, retry_of(result))
    assert rounds == 3
    assert result == {"content": [{"type": "text", "text": "Oslo: 21 C, warm"}]}
    assert log == ["started", "done"]
    await trio.testing.wait_all_tasks_blocked()
    assert len(store) == 0


async def test_a_three_round_flow_over_real_connections() -> None:
    log: list[str] = []
    app = app_with(weather(log))
    client = m.Connection(m.CLIENT, era="modern", capabilities=CAPS)
    server = m.Connection(m.SERVER)
    call = client.call("tools/call", PARAMS)
    done = None
    for _ in range(20):
        for event in drain(client):
            inner = event.event
            if isinstance(inner, (m.engine.SendRequest, m.engine.SendRetry)):
                server.receive_data(client.send(event))
            elif isinstance(inner, m.engine.DispatchInput):
                client.provide(call, inner.key, ANSWERS[inner.key])
            elif isinstance(inner, m.engine.Done):
                done = inner.result
        if done is not None:
            break
        for request in drain(server):
            result = await app.handle(request, server.request_info(request.id), RecordingOutlet())
            client.receive_data(server.send(m.ResultResponse(id=request.id, result=result)))
    assert done is not None and done["content"][0]["text"] == "Oslo: 21 C, warm"
    assert log == ["started", "done"]


async def test_past_the_cap_a_new_flow_is_refused_clearly() -> None:
    app = app_with(weather([]), continuations=ContinuationStore(max_parked=2))
    first = await leg(app, PARAMS)
    await leg(app, PARAMS)
    with pytest.raises(TooManyParked, match="max_parked") as caught:
        await leg(app, PARAMS)
    assert caught.value.code == -32000  # (issue 22: "come back later", not -32603)
    # A parked flow still goes on, and when it ends there is room again.
    result = first
    while result.get("resultType") == "input_required":
        result = await leg(app, retry_of(result))
    await trio.testing.wait_all_tasks_blocked()
    assert len(store_of(app)) == 1
    await leg(app, PARAMS)


async def test_a_finished_flow_frees_its_place_before_its_result_goes_out() -> None:
    # Issue 10: the entry was dropped after the result went out, so with max_parked=1 a
    # flow started right after the previous result arrived was refused (116 times in 200).
    async def one_question(ctx: Context) -> str:
        city = await ctx.wait_for_answer("city", CITY)
        return str(city.content["city"])  # type: ignore[union-attr]

    app = app_with(one_question, continuations=ContinuationStore(max_parked=1))
    served = refused = still_counted = 0
    for _ in range(200):
        try:
            asked = await leg(app, PARAMS)  # right after the previous result: no checkpoint
        except TooManyParked:
            refused += 1
            await trio.sleep(0)
            continue
        done = await leg(app, retry_of(asked))
        assert done == {"content": [{"type": "text", "text": "Oslo"}]}
        served += 1
        still_counted += len(store_of(app))
    assert (served, refused, still_counted) == (200, 0, 0)


async def test_a_failed_flow_frees_its_place_before_its_error_goes_out() -> None:
    async def refuses(ctx: Context) -> str:
        await ctx.wait_for({"city": CITY})
        raise m.MrtrError("no", code=m.ErrorCode.INVALID_PARAMS)

    app = app_with(refuses, continuations=ContinuationStore(max_parked=1))
    for _ in range(50):
        asked = await leg(app, PARAMS)
        with pytest.raises(m.MrtrError, match="no"):
            await leg(app, retry_of(asked))
        assert len(store_of(app)) == 0


async def test_an_idle_parked_handler_is_cancelled_and_evicted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    app = app_with(weather(log), continuations=ContinuationStore(idle_timeout=30.0))
    store = store_of(app)
    first = await leg(app, PARAMS)
    await trio.sleep(29.0)
    second = await leg(app, retry_of(first))  # in time: the timer resets
    await trio.sleep(29.0)
    assert len(store) == 1 and log == ["started"]
    await trio.sleep(2.0)  # 31 s idle: evicted
    assert len(store) == 0 and log == ["started", "cancelled"]
    with pytest.raises(m.server.InvalidRequestState) as caught:
        await leg(app, retry_of(second))
    assert caught.value.data == {"reason": "unknown_continuation"}


async def test_an_older_rounds_state_is_refused_and_a_busy_one_too() -> None:
    app = app_with(weather([]))
    first = await leg(app, PARAMS)
    await leg(app, retry_of(first))  # now in round 2
    with pytest.raises(m.server.InvalidRequestState) as caught:
        await leg(app, retry_of(first))  # round 1's state, replayed
    assert caught.value.data == {"reason": "replayed"}
    tampered = {**retry_of(first), "requestState": first["requestState"] + "x"}
    with pytest.raises(m.server.InvalidRequestState):
        await leg(app, tampered)
    # A state of the right key but not of this store.
    other = sealer().seal(
        {"nothing": 1},
        method="tools/call",
        params=PARAMS,
        principal="ada",
        now=app.clock(),
    )
    with pytest.raises(m.server.InvalidRequestState) as caught:
        await leg(app, {**PARAMS, "requestState": other})
    assert caught.value.data == {"reason": "unknown_continuation"}


async def test_a_duplicate_leg_while_the_handler_runs_is_refused() -> None:
    release = trio.Event()

    async def slow(ctx: Context) -> dict[str, Any]:
        await ctx.wait_for_answer("city", CITY)
        await release.wait()
        return {"content": []}

    app = app_with(slow)
    first = await leg(app, PARAMS)
    results: list[Any] = []

    async def retry() -> None:
        results.append(await leg(app, retry_of(first)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(retry)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(m.server.InvalidRequestState) as caught:
            await leg(app, retry_of(first))
        assert caught.value.data == {"reason": "unknown_continuation"}
        release.set()
    assert results == [{"content": []}]


async def test_a_leg_cancelled_while_the_handler_runs_cancels_the_handler() -> None:
    log: list[str] = []

    async def slow(ctx: Context) -> dict[str, Any]:
        await ctx.wait_for_answer("city", CITY)
        try:
            await trio.sleep_forever()
        finally:
            log.append("handler cancelled")
        return {}  # pragma: no cover

    app = app_with(slow)
    first = await leg(app, PARAMS)
    with trio.move_on_after(1):  # the leg's stream closes: the transport cancels handle()
        await leg(app, retry_of(first))
    await trio.testing.wait_all_tasks_blocked()
    assert log == ["handler cancelled"] and len(store_of(app)) == 0
    with pytest.raises(m.server.InvalidRequestState) as caught:
        await leg(app, retry_of(first))  # the re-issued leg: start over
    assert caught.value.data == {"reason": "unknown_continuation"}


async def test_handler_errors_reach_the_client_and_never_the_nursery() -> None:
    async def needs_sampling(ctx: Context) -> dict[str, Any]:
        if not ctx.can_ask(TONE):
            await ctx.wait_for({"tone": TONE})  # asks anyway: -32021
        return {"content": []}  # pragma: no cover

    async def buggy(ctx: Context) -> str:
        return str(1 / len(ctx.arguments))

    app = app_with(needs_sampling)
    app.add_prompt(buggy, continuation=True)
    with pytest.raises(m.server.CapabilityRequired) as caught:
        await leg(app, PARAMS, caps={"elicitation": {}})
    assert caught.value.data == {"requiredCapabilities": {"sampling": {}}}
    # A bug where the app has no tool result to put it in (a prompt): -32603 naming it.
    request = m.Request(id=1, method="prompts/get", params={"name": "buggy"})
    with pytest.raises(m.MrtrError, match="ZeroDivisionError") as failed:
        await app.handle(request, info(method="prompts/get"), RecordingOutlet())
    assert failed.value.code == -32603
    # A tool's exception is a tool result the model can read, as in the other styles.
    app.add_tool(buggy, "buggy_tool", continuation=True)
    result = await leg(app, {"name": "buggy_tool", "arguments": {}})
    assert result == {"content": [{"type": "text", "text": "division by zero"}], "isError": True}
    await trio.testing.wait_all_tasks_blocked()
    assert len(store_of(app)) == 0


async def test_context_helpers_and_bounds() -> None:
    seen: dict[str, Any] = {}

    async def peek(ctx: Context) -> dict[str, Any]:
        seen["arguments"] = dict(ctx.arguments)
        seen["can_ask"] = (ctx.can_ask(CITY), ctx.can_ask(m.server.list_roots()))
        seen["principal"] = ctx.principal
        return {"content": []}

    app = app_with(peek, name="t")
    await leg(app, {"name": "t"})
    assert seen == {"arguments": {}, "can_ask": (True, False), "principal": "ada"}
    for bad in ({"max_parked": 0}, {"idle_timeout": 0}):
        with pytest.raises(m.LocalProtocolError):
            ContinuationStore(**bad)


# --- hosted by the app ---------------------------------------------------------------------------


def test_the_app_owns_one_store_given_or_made_on_demand() -> None:
    async def handler(ctx: Context) -> str:
        return "x"

    app = McpApp("x", "1")
    assert app.continuations is None  # nothing parks: no store
    app.add_tool(handler, "one", continuation=True)
    made = app.continuations
    assert made is not None and (made.max_parked, made.idle_timeout) == (1000, 300.0)
    app.add_prompt(handler, "two", continuation=True)
    assert app.continuations is made  # one store for every continuation handler
    given = ContinuationStore(max_parked=5, idle_timeout=9.0)
    assert McpApp("y", "1", continuations=given).continuations is given


def test_a_continuation_handler_must_be_an_async_def() -> None:
    app = McpApp("x", "1")
    with pytest.raises(TypeError, match="tool 'plain': a continuation handler is an async def"):
        app.add_tool(lambda ctx: "x", "plain", continuation=True)
    with pytest.raises(TypeError, match="prompt 'plain'"):
        app.add_prompt(lambda ctx: "x", "plain", continuation=True)
    with pytest.raises(TypeError, match="resource 'mem://x'"):
        app.add_resource(lambda ctx: "x", "mem://x", name="x", continuation=True)
    with pytest.raises(TypeError, match=re.escape("resource template 'mem://{id}'")):
        app.add_resource_template(lambda ctx: "x", "mem://{id}", name="x", continuation=True)
    assert app.continuations is None and app.tools == {}


async def test_styles_are_not_mixed_by_mistake() -> None:
    async def reentrant_waits(ctx: Context) -> str:
        await ctx.wait_for({"city": CITY})
        return "unreachable"  # pragma: no cover

    async def continuation_returns_an_ask(ctx: Context) -> Any:
        return ctx.ask({"city": CITY})

    app = McpApp("x", "1")
    app.add_prompt(reentrant_waits)
    app.add_prompt(continuation_returns_an_ask, continuation=True)
    request = m.Request(id=1, method="prompts/get", params={"name": "reentrant_waits"})
    with pytest.raises(RuntimeError, match="continuation=True"):
        await app.handle(request, info(method="prompts/get"), RecordingOutlet())
    request = m.Request(id=1, method="prompts/get", params={"name": "continuation_returns_an_ask"})
    with pytest.raises(m.MrtrError, match=r"awaits ctx\.wait_for") as caught:
        await app.handle(request, info(method="prompts/get"), RecordingOutlet())
    assert caught.value.code == -32603


async def test_the_context_follows_the_leg_that_resumed_it() -> None:
    seen: list[tuple[Any, ...]] = []

    async def report(ctx: Context) -> str:
        await ctx.progress(1, 2, "asking")
        answers = await ctx.wait_for({"city": CITY})
        # Now the retry's leg: its params, its own declared capabilities, its outlet.
        seen.append((ctx.request.id, "inputResponses" in ctx.params, ctx.can_ask(TONE)))
        seen.append((ctx.state, answers.get("city", CITY) == ctx.answer("city", CITY)))
        await ctx.progress(2, 2, "answered")
        return "done"

    app = app_with(report, name="report")
    first_outlet, second_outlet = RecordingOutlet(), RecordingOutlet()
    params = {"name": "report", "arguments": {}}
    asked = await leg(app, params, outlet=first_outlet)
    retry = m.Request(id=2, method="tools/call", params=retry_of(asked, params=params))
    done = await app.handle(retry, info({"elicitation": {}}), second_outlet)
    assert done == {"content": [{"type": "text", "text": "done"}]}
    assert seen == [(2, True, False), (None, True)]
    assert first_outlet.sent == [("progress", 1, 2, "asking")]
    assert second_outlet.sent == [("progress", 2, 2, "answered")]


async def test_resources_and_prompts_may_be_continuations_too() -> None:
    app = McpApp("x", "1")

    @app.resource_template("mem://{id}", continuation=True)
    async def record(ctx: Context) -> str:
        answer = await ctx.wait_for_answer("city", CITY)
        return f"{ctx.uri_params['id']} in {answer.content['city']}"  # type: ignore[union-attr]

    @app.prompt(continuation=True)
    async def about(ctx: Context) -> str:
        answer = await ctx.wait_for_answer("city", CITY)
        return f"Tell me about {answer.content['city']}"  # type: ignore[union-attr]

    read = await serve_call(app, "resources/read", {"uri": "mem://7"}, lambda k, r: ANSWERS[k])
    assert read.result is not None and read.legs == 2
    assert read.result["contents"] == [{"uri": "mem://7", "text": "7 in Oslo"}]
    got = await serve_call(app, "prompts/get", {"name": "about"}, lambda k, r: ANSWERS[k])
    assert got.result is not None and got.legs == 2
    assert got.result["messages"][0]["content"]["text"] == "Tell me about Oslo"


async def test_over_connections_progress_goes_to_each_legs_stream() -> None:
    async def counted(ctx: Context) -> str:
        await ctx.progress(1, 3)
        city = await ctx.wait_for_answer("city", CITY)
        await ctx.progress(2, 3)
        await ctx.progress(3, 3)
        return f"Sunny in {city.content['city']}"  # type: ignore[union-attr]

    app = app_with(counted, name="counted")
    served = await serve_call(
        app,
        "tools/call",
        {"name": "counted", "arguments": {}},
        lambda k, r: ANSWERS[k],
        progress=True,
    )
    assert served.result is not None
    assert served.result["content"] == [{"type": "text", "text": "Sunny in Oslo"}]
    assert (served.legs, served.rounds) == (2, [("city",)])
    assert served.progress == [(1, 3), (2, 3), (3, 3)]


async def test_a_2025_client_is_served_through_the_legacy_shim() -> None:
    log: list[str] = []
    app = app_with(weather(log))
    forms = iter([accept({"city": "Oslo"}), accept({"units": "C"})])

    class Answers(dict[str, Any]):
        def __getitem__(self, method: str) -> Any:
            return next(forms) if method == "elicitation/create" else ANSWERS["tone"]

    final, asked = await serve_legacy_call(app, PARAMS, Answers(), CAPS)
    assert isinstance(final, m.engine.Done), final
    assert final.result == {"content": [{"type": "text", "text": "Oslo: 21 C, warm"}]}
    assert asked == ["elicitation/create", "elicitation/create", "sampling/createMessage"]
    assert log == ["started", "done"]


async def test_over_real_http_each_legs_progress_streams_on_its_own_response() -> None:
    async def counted(ctx: Context) -> str:
        await ctx.progress(1, 2)
        city = await ctx.wait_for_answer("city", CITY)
        await ctx.progress(2, 2)
        return f"Sunny in {city.content['city']}"  # type: ignore[union-attr]

    app = app_with(counted, name="counted")
    progress: list[float] = []

    async def answer(key: str, request: m.wire.InputRequest) -> Any:
        return ANSWERS[key]

    with trio.fail_after(10):
        server = HttpServer(app)
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            url = f"http://{host}:{port}/mcp"
            async with open_http_client(url, answer=answer, capabilities=CAPS) as client:
                result = await client.call_tool(
                    "counted", on_progress=lambda note: progress.append(note.progress)
                )
            await server.aclose(grace=0.5)
    assert result["content"] == [{"type": "text", "text": "Sunny in Oslo"}]
    assert progress == [1, 2]
    assert len(store_of(app)) == 0
