"""The client's call loop, against a real server Connection over an in-memory link.

``MemoryLink`` is a complete ``Link``: what the client transmits goes to a
``mrtr_core.Connection(SERVER)`` in a trio task, whose replies come back
through ``client.receive_data``, exactly as a stdio link does with a child.
Each test scripts the server app and checks what the client does: rounds,
concurrent input handlers, the three time limits, caps, errors, cancellation,
progress and trace records.  (Real processes and sockets: test_stdio_client.py
and test_http_client.py.)
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import pytest
import trio
import trio.testing
from mrtr_transports.client.client import Client, Outbound, TraceRecord
from mrtr_transports.client.errors import (
    CallError,
    CallTimeout,
    ClientError,
    InputUnavailable,
    RoundCapExceeded,
    TransportError,
)
from mrtr_transports.client.opening import open_client

import mrtr_core as m
from mrtr_core import AppResultRefused

ASK_NAME = {
    "method": "elicitation/create",
    "params": {
        "message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
ASK_LLM = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 5,
    },
}
LLM_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "test"}

App = Callable[[m.Request, "MemoryLink"], Awaitable[Any]]


def needs(requests: dict[str, Any] | None = None, state: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"resultType": "input_required"}
    if requests:
        out["inputRequests"] = requests
    if state is not None:
        out["requestState"] = state
    return out


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


class MemoryLink:
    """A link to an in-process server Connection (lines framing)."""

    framing = "lines"
    needs_messages = False
    wants_tool_list = False
    confirms_transmission = False
    cancellation: Literal["notify", "close_stream"] = "notify"

    def __init__(self, app: App) -> None:
        self.app = app
        self.server = m.Connection(
            m.SERVER, info={"name": "memory", "version": "1"}, capabilities={"tools": {}}
        )
        self.seen: list[dict[str, Any]] = []  # every message the server read
        self.cancelled: list[m.RequestId] = []
        self._send, self._receive = trio.open_memory_channel[bytes](1000)
        self.client: Client | None = None
        self.closed = False

    async def start(self, client: Client, nursery: trio.Nursery) -> None:
        self.client = client
        nursery.start_soon(self._serve, nursery)

    def transmit(self, out: Outbound) -> None:
        self._send.send_nowait(out.data)

    def close_stream(self, request_id: m.RequestId) -> None:
        pass

    def tools_listed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return tools

    async def aclose(self) -> None:
        self.closed = True
        self._send.close()

    def requests(self, method: str = "tools/call") -> list[dict[str, Any]]:
        return [msg for msg in self.seen if msg.get("method") == method and "id" in msg]

    async def _serve(self, nursery: trio.Nursery) -> None:
        async for data in self._receive:
            self.seen.extend(json.loads(line) for line in data.splitlines() if line.strip())
            self.server.receive_data(data)
            while (event := self.server.next_event()) is not m.NEED_DATA:
                if isinstance(event, (m.AutoReply, m.InvalidMessage)) and event.reply is not None:
                    self.reply(event.reply)
                elif isinstance(event, m.Request):
                    nursery.start_soon(self._handle, event)
                elif isinstance(event, m.RequestCancelled):
                    self.cancelled.append(event.request_id)

    async def _handle(self, request: m.Request) -> None:
        outcome = await self.app(request, self)
        if isinstance(outcome, m.MrtrError):
            self.reply(m.error_response(request.id, outcome))
        elif outcome is not None:
            try:
                self.reply(m.ResultResponse(id=request.id, result=outcome))
            except (AppResultRefused, m.LocalProtocolError) as exc:  # e.g. -32021: undeclared
                self.reply(m.error_response(request.id, exc))

    def reply(self, message: Any) -> None:
        data = self.server.send(message)
        if data and self.client is not None and not self.closed:
            self.client.receive_data(data)


async def tool_app(request: m.Request, link: MemoryLink) -> Any:
    """The tools the tests call, by name."""
    params = request.params or {}
    name = params.get("name")
    answers = params.get("inputResponses") or {}
    state = params.get("requestState")
    if request.method == "tools/list":
        return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    if name == "two_rounds":  # a name, then an LLM completion, then the result
        if state is None:
            return needs({"name": ASK_NAME}, state="r1")
        if state == "r1":
            return needs({"llm": ASK_LLM}, state=f"r2:{answers['name']['content']['name']}")
        return text(f"{state[3:]} / {answers['llm']['content']['text']}")
    if name == "three_keys":
        if not answers:
            return needs({"a": ASK_NAME, "b": ASK_NAME, "c": ASK_NAME})
        return text(",".join(f"{k}={v['content']['name']}" for k, v in sorted(answers.items())))
    if name == "forever":
        return needs({f"q{int(state or 0) + 1}": ASK_NAME}, state=str(int(state or 0) + 1))
    if name == "state_only":
        return needs(state="again")
    if name == "sampling":
        return needs({"llm": ASK_LLM}) if not answers else text("sampled")
    if name == "slow":
        await trio.sleep_forever()
    if name == "progress":
        for step in (1, 2):
            link.reply(m.Progress(request_id=request.id, progress=step, total=2))
        return text("done")
    if name == "broken":
        return m.MrtrError("bad arguments", code=m.ErrorCode.INVALID_PARAMS, data={"field": "x"})
    return text("plain")


async def with_client(
    body: Callable[[Client, MemoryLink], Awaitable[None]],
    *,
    app: App = tool_app,
    **options: Any,
) -> MemoryLink:
    link = MemoryLink(app)
    with trio.fail_after(5):
        async with open_client(link, era="modern", **options) as client:
            await body(client, link)
    return link


def accept_name(name: str) -> Callable[[str, m.wire.InputRequest], Awaitable[Any]]:
    async def answer(key: str, request: m.wire.InputRequest) -> Any:
        if isinstance(request, m.wire.CreateMessageRequest):
            return LLM_ANSWER
        return m.wire.ElicitResult(action="accept", content={"name": name})

    return answer


async def test_a_two_round_flow_echoes_state_and_uses_fresh_ids() -> None:
    asked: list[tuple[str, str]] = []

    async def answer(key: str, request: m.wire.InputRequest) -> Any:
        asked.append((key, request.method))
        return await accept_name("Ada")(key, request)

    async def body(client: Client, link: MemoryLink) -> None:
        result = await client.call_tool("two_rounds")
        assert result["content"][0]["text"] == "Ada / hello"
        legs = link.requests()
        assert len(legs) == 3 and len({leg["id"] for leg in legs}) == 3
        assert "requestState" not in legs[0]["params"]
        assert legs[1]["params"]["requestState"] == "r1"
        assert legs[2]["params"]["requestState"] == "r2:Ada"
        assert legs[2]["params"]["inputResponses"] == {"llm": LLM_ANSWER}  # this round only

    await with_client(body, answer=answer)
    assert asked == [("name", "elicitation/create"), ("llm", "sampling/createMessage")]


async def test_input_handlers_of_one_round_run_concurrently() -> None:
    started: set[str] = set()
    everyone_in = trio.Event()

    async def answer(key: str, request: m.wire.InputRequest) -> Any:
        started.add(key)
        if len(started) == 3:
            everyone_in.set()
        await everyone_in.wait()  # would deadlock if handlers ran one after another
        return m.wire.ElicitResult(action="accept", content={"name": key.upper()})

    async def body(client: Client, link: MemoryLink) -> None:
        result = await client.call_tool("three_keys")
        assert result["content"][0]["text"] == "a=A,b=B,c=C"

    await with_client(body, answer=answer)


async def test_input_unavailable_fails_the_call_and_cancels_the_other_handlers() -> None:
    cancelled: list[str] = []

    async def answer(key: str, request: m.wire.InputRequest) -> Any:
        if key == "b":
            raise InputUnavailable("the user walked away")
        try:
            await trio.sleep_forever()
        finally:
            cancelled.append(key)

    async def body(client: Client, link: MemoryLink) -> None:
        with pytest.raises(InputUnavailable) as caught:
            await client.call_tool("three_keys")
        assert caught.value.key == "b" and caught.value.reason == "the user walked away"
        assert len(link.requests()) == 1  # nothing was sent for the failed round

    await with_client(body, answer=answer)
    assert sorted(cancelled) == ["a", "c"]


async def test_a_failing_or_wrong_handler_is_input_unavailable() -> None:
    async def crashes(key: str, request: m.wire.InputRequest) -> Any:
        raise RuntimeError("boom")

    async def wrong_kind(key: str, request: m.wire.InputRequest) -> Any:
        return m.wire.ListRootsResult(roots=[])  # a roots answer to an elicitation

    async def crashing(client: Client, link: MemoryLink) -> None:
        with pytest.raises(InputUnavailable) as caught:
            await client.call_tool("three_keys")
        assert isinstance(caught.value.__cause__, RuntimeError)
        assert "boom" in caught.value.reason

    async def wrong(client: Client, link: MemoryLink) -> None:
        with pytest.raises(InputUnavailable) as caught:
            await client.call_tool("three_keys")
        assert "ElicitResult" in caught.value.reason
        assert len(link.requests()) == 1  # the bad answer never reached the server

    await with_client(crashing, answer=crashes)
    await with_client(wrong, answer=wrong_kind)


async def test_without_an_input_handler_nothing_is_declared_and_asking_fails() -> None:
    async def body(client: Client, link: MemoryLink) -> None:
        # The request declared no capabilities: the server may not ask (-32021).
        with pytest.raises(CallError) as caught:
            await client.call_tool("sampling")
        assert caught.value.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
        meta = link.requests()[0]["params"]["_meta"]
        # no input capability; the tasks extension only (a task that asks is refused)
        assert meta[m.wire.META_CLIENT_CAPABILITIES] == {
            "extensions": {m.tasks.TASKS_EXTENSION: {}}
        }

    async def no_tasks(client: Client, link: MemoryLink) -> None:
        with pytest.raises(CallError):
            await client.call_tool("sampling")
        meta = link.requests()[0]["params"]["_meta"]
        assert meta[m.wire.META_CLIENT_CAPABILITIES] == {}

    await with_client(body)
    await with_client(no_tasks, tasks=False)


async def test_the_round_cap_is_round_cap_exceeded() -> None:
    async def body(client: Client, link: MemoryLink) -> None:
        with pytest.raises(RoundCapExceeded) as caught:
            await client.call_tool("forever", max_rounds=2)
        assert caught.value.rounds == 2 and caught.value.limit_name == "max_rounds"
        assert caught.value.last_result["requestState"] == "3"
        assert len(link.requests()) == 3  # the original and two answered retries

    await with_client(body, answer=accept_name("x"))


async def test_the_state_only_leg_cap_reaches_the_core() -> None:
    # Regression: Client.call passed only max_rounds to Connection.call, never this bound.
    async def body(client: Client, link: MemoryLink) -> None:
        with pytest.raises(RoundCapExceeded) as caught:
            await client.call_tool("state_only", max_state_only_legs=2)
        assert caught.value.rounds == 2 and caught.value.limit_name == "max_state_only_legs"
        assert caught.value.last_result["requestState"] == "again"
        assert len(link.requests()) == 3  # the original and two state-only retries

    await with_client(body)


async def test_a_json_rpc_error_is_call_error() -> None:
    async def body(client: Client, link: MemoryLink) -> None:
        with pytest.raises(CallError) as caught:
            await client.call_tool("broken")
        error = caught.value
        assert (error.code, error.message, error.data) == (-32602, "bad arguments", {"field": "x"})

    await with_client(body)


async def test_a_leg_timeout_cancels_the_leg_on_the_wire() -> None:
    async def body(client: Client, link: MemoryLink) -> None:
        with pytest.raises(CallTimeout) as caught:
            await client.call_tool("slow", leg_timeout=0.1)
        assert caught.value.limit == "leg" and caught.value.budget == 0.1
        await trio.testing.wait_all_tasks_blocked()
        assert link.cancelled == [link.requests()[0]["id"]]  # notifications/cancelled for it

    await with_client(body)


async def test_an_input_timeout_withdraws_the_question() -> None:
    withdrawn = trio.Event()

    async def answer(key: str, request: m.wire.InputRequest) -> Any:
        try:
            await trio.sleep_forever()
        finally:
            withdrawn.set()

    async def body(client: Client, link: MemoryLink) -> None:
        with pytest.raises(CallTimeout) as caught:
            await client.call_tool("two_rounds", input_timeout=0.1)
        assert caught.value.limit == "input"
        assert withdrawn.is_set()

    await with_client(body, answer=answer)


async def test_the_whole_flow_budget_covers_state_only_pacing() -> None:
    async def body(client: Client, link: MemoryLink) -> None:
        with pytest.raises(CallTimeout) as caught:
            await client.call("tools/call", {"name": "state_only"}, timeout=0.3)
        assert caught.value.limit == "total" and caught.value.budget == pytest.approx(0.3)
        legs = link.requests()
        assert 2 <= len(legs) <= 6  # paced (50, 100, 200 ms...), not hammered
        assert all(leg["params"].get("requestState") == "again" for leg in legs[1:])

    await with_client(body)


async def test_a_caller_that_gives_up_cancels_the_call_and_the_client_goes_on() -> None:
    async def body(client: Client, link: MemoryLink) -> None:
        with trio.move_on_after(0.1):
            await client.call_tool("slow")
        await trio.testing.wait_all_tasks_blocked()
        assert link.cancelled == [link.requests()[0]["id"]]
        result = await client.call_tool("plain")
        assert result["content"][0]["text"] == "plain"

    await with_client(body)


async def test_progress_reaches_on_progress_with_the_call() -> None:
    seen: list[m.Progress] = []

    async def body(client: Client, link: MemoryLink) -> None:
        await client.call_tool("progress", on_progress=seen.append)
        token = link.requests()[0]["params"]["_meta"]["progressToken"]
        assert [p.progress for p in seen] == [1, 2]
        assert all(p.request_id == token and p.call is not None for p in seen)

    await with_client(body)


async def test_trace_records_carry_flow_and_round() -> None:
    records: list[TraceRecord] = []

    async def body(client: Client, link: MemoryLink) -> None:
        await client.call_tool("two_rounds")
        await client.request("tools/list")

    await with_client(body, answer=accept_name("Ada"), tracer=records.append)
    calls = [r for r in records if r.flow is not None]
    assert [(r.dir, r.round) for r in calls] == [
        ("send", 0),
        ("recv", 1),  # an input_required result carries the round it opens...
        ("send", 1),  # ...and pairs with the retry that answers it
        ("recv", 2),
        ("send", 2),
        ("recv", 2),
    ]
    assert len({r.flow for r in calls}) == 1
    for received, sent in ((calls[1], calls[2]), (calls[3], calls[4])):
        assert sent.msg["params"]["requestState"] == received.msg["result"]["requestState"]
    plain = [r for r in records if r.flow is None]
    assert [r.msg.get("method") for r in plain if r.dir == "send"] == ["tools/list"]
    assert all(r.t >= 0 for r in records)


async def test_plain_requests_answer_fail_and_time_out() -> None:
    async def app(request: m.Request, link: MemoryLink) -> Any:
        if request.method == "resources/list":
            return m.MrtrError("no resources", code=m.ErrorCode.METHOD_NOT_FOUND)
        if request.method == "prompts/list":
            await trio.sleep_forever()
        return {"tools": []}

    async def body(client: Client, link: MemoryLink) -> None:
        assert (await client.request("tools/list"))["tools"] == []
        with pytest.raises(CallError) as caught:
            await client.request("resources/list")
        assert caught.value.code == m.ErrorCode.METHOD_NOT_FOUND
        with pytest.raises(CallTimeout):
            await client.request("prompts/list", timeout=0.05)
        await trio.testing.wait_all_tasks_blocked()
        assert link.cancelled == [link.requests("prompts/list")[0]["id"]]

    await with_client(body, app=app)


async def test_a_lost_link_fails_calls_in_flight_with_its_error() -> None:
    async def body(client: Client, link: MemoryLink) -> None:
        async def lose() -> None:
            await trio.sleep(0.05)
            client.link_lost(TransportError("the wire was cut", ["last words"]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(lose)
            with pytest.raises(TransportError) as caught:
                await client.call_tool("slow")
        assert caught.value.message == "the wire was cut"
        assert caught.value.stderr_tail == ["last words"]
        with pytest.raises(TransportError):  # and so does everything after it
            await client.request("tools/list")

    await with_client(body)


async def test_closing_the_client_fails_a_call_in_another_task() -> None:
    outcome: list[BaseException] = []

    async def body(client: Client, link: MemoryLink) -> None:
        async def call() -> None:
            try:
                await client.call_tool("slow")
            except ClientError as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.sleep(0.05)
            await client.aclose()

    await with_client(body)
    assert len(outcome) == 1
    assert isinstance(outcome[0], TransportError) and outcome[0].kind == "closed"


async def test_an_exception_in_the_body_comes_out_unwrapped() -> None:
    async def body(client: Client, link: MemoryLink) -> None:
        raise KeyError("mine")

    with pytest.raises(KeyError):
        await with_client(body)


async def test_the_auto_era_probe_opens_a_modern_session() -> None:
    link = MemoryLink(tool_app)
    with trio.fail_after(5):
        async with open_client(link, info={"name": "t", "version": "9"}) as client:
            assert (client.era, client.protocol_version) == ("modern", "2026-07-28")
            assert client.peer_info == {"name": "memory", "version": "1"}
            assert (await client.call_tool("plain"))["content"][0]["text"] == "plain"
    probe = link.seen[0]
    assert probe["method"] == "server/discover"
    assert probe["params"]["_meta"][m.wire.META_CLIENT_INFO] == {"name": "t", "version": "9"}
