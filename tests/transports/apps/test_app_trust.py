"""The app never believes the client: the issue's reproductions, in-process and over HTTP.

* a ``deploy`` confirmation sent without the ``requestState`` of the leg that asked
  for it deploys nothing (the example app's tool asks again; ``examples/deploy.py``
  refuses with -32602 ``unproven``), in-process and over a real HTTP socket;
* a redeemed state is spent once, in the app's pluggable async single-use store;
  single-leg calls spend nothing; 50 concurrent replays deploy once;
* arguments are checked against the tool's ``inputSchema`` (an ``isError`` result)
  and form answers against their ``requestedSchema`` (-32602 naming the field).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import h11
import pytest
import trio
from mrtr_transports.apps import example as example_app
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.single_use import MemorySingleUse, SingleUseStore
from mrtr_transports.server.http import HttpServer
from test_mcp_app import accept, call, error_of, retry_params

import mrtr_core as m

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
YES = {"confirm": accept({"confirm": True})}
DEPLOY = {"name": "deploy", "arguments": {"env": "prod"}}
FORGED = {**DEPLOY, "inputResponses": YES}


def load_deploy_example() -> ModuleType:
    """A fresh copy of ``examples/deploy.py`` (its own app and deployments list)."""
    spec = importlib.util.spec_from_file_location("deploy_example", EXAMPLES / "deploy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def deploy_app(**options: Any) -> McpApp:
    """A fresh app serving the example app's own ``deploy`` tool."""
    app = McpApp("deployer", "1.0", **options)
    app.add_tool(
        example_app.deploy, input_schema={"type": "object"}, require_proof=True, name="deploy"
    )
    return app


# --- 1. a confirmation round cannot be skipped ------------------------------------------------


async def test_the_example_deploy_asks_again_when_the_confirmation_was_never_asked() -> None:
    before = len(example_app.deployments)
    for _ in range(3):
        reply = await call(example_app.app, "tools/call", FORGED)
        assert reply["resultType"] == "input_required"
        assert list(reply["inputRequests"]) == ["confirm"]
    assert len(example_app.deployments) == before  # 0 deploys out of 3
    # The honest flow still deploys, once.
    done = await call(example_app.app, "tools/call", retry_params(DEPLOY, reply, YES))
    assert done["content"][0]["text"] == "Deployed to prod."
    assert example_app.deployments[before:] == ["prod"]


async def test_examples_deploy_refuses_the_skipped_confirmation() -> None:
    example = load_deploy_example()
    for _ in range(3):
        refused = await error_of(example.app, "tools/call", FORGED)
        assert refused.code == -32602
        assert refused.data == {"key": "confirm", "reason": "unproven"}
    assert example.deployments == []
    first = await call(example.app, "tools/call", DEPLOY)
    await call(example.app, "tools/call", retry_params(DEPLOY, first, YES))
    assert example.deployments == ["prod"]


class HttpClient:
    """Raw HTTP/1.1 POSTs (h11) to a server on 127.0.0.1: what any client could send."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def post(self, params: Mapping[str, Any]) -> dict[str, Any]:
        meta = {
            m.wire.META_PROTOCOL_VERSION: "2026-07-28",
            m.wire.META_CLIENT_CAPABILITIES: {"elicitation": {}},
        }
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**params, "_meta": meta}}
        ).encode()
        headers = [
            ("Host", f"127.0.0.1:{self.port}"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", params["name"]),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
        ]
        conn = h11.Connection(h11.CLIENT)
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        async with stream:
            request = h11.Request(method="POST", target="/mcp", headers=headers)
            await stream.send_all(
                conn.send(request) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
            )
            received = b""
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Data):
                    received += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
        reply = json.loads(received)
        assert isinstance(reply, dict)
        return reply


@pytest.mark.parametrize("which", ["example app", "examples/deploy.py"])
async def test_over_http_a_skipped_confirmation_deploys_nothing(which: str) -> None:
    if which == "example app":
        app, deployments = deploy_app(), example_app.deployments
    else:
        example = load_deploy_example()
        app, deployments = example.app, example.deployments
    before = len(deployments)
    server = HttpServer(app)
    async with trio.open_nursery() as nursery:
        _, port = await nursery.start(server.serve, "127.0.0.1", 0)
        client = HttpClient(port)
        for _ in range(3):
            reply = await client.post(FORGED)
            if which == "example app":
                assert list(reply["result"]["inputRequests"]) == ["confirm"]
            else:
                assert reply["error"]["code"] == -32602
                assert reply["error"]["data"] == {"key": "confirm", "reason": "unproven"}
        assert len(deployments) == before
        first = await client.post(DEPLOY)
        done = await client.post(retry_params(DEPLOY, first["result"], YES))
        assert done["result"]["content"][0]["text"].startswith("Deployed to prod")
        replay = await client.post(retry_params(DEPLOY, first["result"], YES))
        assert replay["error"]["data"] == {"reason": "replayed"}
        await server.aclose(grace=0.5)
    assert deployments[before:] == ["prod"]


# --- 2. the single-use store ------------------------------------------------------------------


async def test_single_leg_calls_leave_the_store_empty_and_a_later_flow_works() -> None:
    store = MemorySingleUse(max_entries=10)
    app = deploy_app(single_use=store)
    before = len(example_app.deployments)
    for _ in range(1000):
        reply = await call(app, "tools/call", FORGED)
        assert reply["resultType"] == "input_required"
    assert len(store) == 0
    first = await call(app, "tools/call", DEPLOY)
    done = await call(app, "tools/call", retry_params(DEPLOY, first, YES))
    assert done["content"][0]["text"] == "Deployed to prod."
    assert len(store) == 1
    assert example_app.deployments[before:] == ["prod"]


class SlowStore:
    """A shared store with a network round trip: other legs run while it is awaited."""

    def __init__(self) -> None:
        self.inner = MemorySingleUse()
        self.calls = 0

    async def consume(self, nonce: str, expires_at: float, now: float, *, client: str) -> bool:
        self.calls += 1
        await trio.sleep(0.001)
        return await self.inner.consume(nonce, expires_at, now, client=client)


async def test_fifty_concurrent_replays_of_one_state_deploy_once() -> None:
    store = SlowStore()
    app = deploy_app(single_use=store)
    before = len(example_app.deployments)
    first = await call(app, "tools/call", DEPLOY)
    retry = retry_params(DEPLOY, first, YES)
    outcomes: list[str] = []

    async def replay(n: int) -> None:
        try:
            result = await call(app, "tools/call", retry, rid=n)
            outcomes.append(result["content"][0]["text"])
        except m.MrtrError as exc:
            outcomes.append(exc.data["reason"])

    async with trio.open_nursery() as nursery:
        for n in range(50):
            nursery.start_soon(replay, n)
    assert store.calls == 50
    assert sorted(outcomes) == ["Deployed to prod."] + ["replayed"] * 49
    assert example_app.deployments[before:] == ["prod"]


async def test_a_state_is_spent_in_the_store_every_process_shares() -> None:
    keys = {"k1": m.server.StateSealer.new_key()}
    shared: SingleUseStore = MemorySingleUse()
    one, two = deploy_app(), deploy_app()
    for app in (one, two):
        app.configure_state(keys, "k1", single_use=shared)
    before = len(example_app.deployments)
    first = await call(one, "tools/call", DEPLOY)  # asked by process one ...
    retry = retry_params(DEPLOY, first, YES)
    await call(two, "tools/call", retry)  # ... answered at process two
    refused = await error_of(one, "tools/call", retry)  # replayed at process one
    assert refused.data == {"reason": "replayed"}
    assert example_app.deployments[before:] == ["prod"]


async def test_configure_state_defaults_to_a_fresh_store_of_this_process() -> None:
    app = deploy_app()
    app.configure_state({"k2": m.server.StateSealer.new_key()}, "k2")
    assert isinstance(app.single_use, MemorySingleUse) and len(app.single_use) == 0
    first = await call(app, "tools/call", DEPLOY)
    assert first["requestState"].startswith("mrtr1.k2.")


async def test_without_a_store_a_replayed_state_is_served_again() -> None:
    """The documented trade-off of ``single_use=None``: guards live in the state only."""
    app = McpApp("x", "1", single_use=None)
    ran: list[int] = []

    @app.tool()
    def ask_then_count(ctx: Context) -> Any:
        if ctx.answer("confirm", example_app.CONFIRM_DEPLOY) is None:
            return ctx.ask({"confirm": example_app.CONFIRM_DEPLOY})
        ran.append(1)
        return "counted"

    params = {"name": "ask_then_count", "arguments": {}}
    first = await call(app, "tools/call", params)
    for _ in range(2):
        await call(app, "tools/call", retry_params(params, first, YES))
    assert ran == [1, 1]


async def test_a_full_store_fails_closed_before_the_handler_runs() -> None:
    store = MemorySingleUse(max_entries=1)
    app = deploy_app(single_use=store)
    before = len(example_app.deployments)
    flows = [await call(app, "tools/call", DEPLOY) for _ in range(2)]
    await call(app, "tools/call", retry_params(DEPLOY, flows[0], YES))
    full = await error_of(app, "tools/call", retry_params(DEPLOY, flows[1], YES))
    # (Issue 22: a full store says which bound it met, as "come back later", -32000.)
    assert isinstance(full, m.server.NonceStoreFull) and full.code == -32000
    assert "single-use max_entries=1" in full.message  # (in memory: one client, the whole store)
    assert example_app.deployments[before:] == ["prod"]


async def test_a_continuation_reads_the_answers_it_waited_for_as_proven() -> None:
    app = McpApp("x", "1")
    deployed: list[str] = []

    @app.tool(continuation=True)
    async def deploy(ctx: Context) -> str:
        ctx.require_proof()
        answer = await ctx.wait_for_answer("confirm", example_app.CONFIRM_DEPLOY)
        assert ctx.answers.require_proof and ctx.answers.unproven == set()
        if answer.action == "accept" and ctx.once("deploy"):
            deployed.append("prod")
        return "done"

    params = {"name": "deploy", "arguments": {}}
    first = await call(app, "tools/call", params)
    assert (await call(app, "tools/call", retry_params(params, first, YES)))["content"]
    assert deployed == ["prod"]


# --- 3. arguments and answers against their schemas ----------------------------------------


def schema_app() -> McpApp:
    app = McpApp("x", "1")

    @app.tool(
        input_schema={
            "type": "object",
            "properties": {
                "nights": {"type": "integer", "minimum": 1, "maximum": 30},
                "email": {"type": "string", "format": "email"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["nights"],
            "additionalProperties": False,
        }
    )
    def book(ctx: Context) -> str:
        return f"booked {ctx.arguments['nights']}"

    return app


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({}, "Invalid argument 'nights'"),
        ({"nights": "3"}, "Invalid argument 'nights'"),
        ({"nights": 40}, "maximum"),
        ({"nights": 3, "email": "nope"}, "Invalid argument 'email'"),
        ({"nights": 3, "tags": [1]}, "Invalid argument 'tags/0'"),
        ({"nights": 3, "extra": 1}, "'extra'"),
    ],
)
async def test_arguments_breaking_the_input_schema_are_a_tool_error(
    arguments: dict[str, Any], complaint: str
) -> None:
    app = schema_app()
    result = await call(app, "tools/call", {"name": "book", "arguments": arguments})
    assert result["isError"] is True
    assert complaint in result["content"][0]["text"]


async def test_deeply_nested_arguments_are_a_tool_error_not_a_crash() -> None:
    deep: Any = "x"
    for _ in range(1000):
        deep = [deep]
    app = schema_app()
    result = await call(
        app, "tools/call", {"name": "book", "arguments": {"nights": 3, "tags": deep}}
    )
    assert result["isError"] is True and "nested" in result["content"][0]["text"]
    ok = await call(app, "tools/call", {"name": "book", "arguments": {"nights": 3}})
    assert ok["content"][0]["text"] == "booked 3"


def test_a_tool_with_an_unusable_input_schema_is_refused_at_registration() -> None:
    app = McpApp("x", "1")
    with pytest.raises(ValueError, match="not a usable JSON Schema"):
        app.add_tool(lambda ctx: "", "bad", input_schema={"type": "object", "minProperties": -1})


async def test_a_form_answer_breaking_its_schema_is_32602_naming_key_and_field() -> None:
    params = {"name": "plan_trip", "arguments": {"destination": "Lisbon"}}
    first = await call(example_app.app, "tools/call", params)
    second = await call(
        example_app.app,
        "tools/call",
        retry_params(params, first, {"traveller": accept({"name": "Ada"})}),
    )
    assert list(second["inputRequests"]) == ["nights"]
    refused = await error_of(
        example_app.app,
        "tools/call",
        retry_params(params, second, {"nights": accept({"nights": 40})}),
    )
    assert refused.code == -32602
    assert refused.data["key"] == "nights" and refused.data["field"] == "/nights"
    assert "30" in refused.data["reason"]
