"""Our client and ``mrtr call`` against the official TypeScript SDK v2 server (2.4.0).

``tests/support/ts/peer_server.mjs`` is an ``McpServer`` whose handlers return
``inputRequired(...)`` and are written once for both eras: on 2026-07-28 our
client fulfils the rounds, on a 2025 connection the SDK's legacy shim sends
real server-to-client requests that our client answers.  Every
``requestState`` it sends is sealed by ``createRequestStateCodec`` (HMAC,
bound to the method) and verified before the handler runs, so these flows
completing, with the trace showing each retry carrying exactly the string
received, is the byte-exact echo checked end to end; a state changed by one
character is refused.  Over stdio the SDK's ``serveStdio`` picks the era per
connection; over HTTP ``createMcpHandler`` runs inside ``node:http``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.client.client import Client, TraceRecord
from mrtr_transports.client.errors import CallError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.stdio import open_stdio_client
from support.cli_run import mrtr
from support.tampering import tampered
from support.ts_peers import SERVER_JS, node, ts_http_server

import mrtr_core as m

ERAS = {"modern": ("modern", "2026-07-28"), "legacy": ("legacy", "2025-11-25")}


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    if isinstance(request, m.wire.ElicitFormRequest):
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})
    if isinstance(request, m.wire.CreateMessageRequest):
        text = {"type": "text", "text": "hi-from-llm"}
        return m.wire.CreateMessageResult(role="assistant", content=text, model="test-model")
    return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///workspace", name="ws")])


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with ts_http_server() as url:
        yield url


@asynccontextmanager
async def connect(
    transport: str, era: str, request: pytest.FixtureRequest, **options: Any
) -> AsyncIterator[Client]:
    """Our client, connected to the SDK server; ``era`` "modern" probes (``auto``)."""
    options = {"answer": answer, "era": "auto" if era == "modern" else era, **options}
    if transport == "stdio":
        async with open_stdio_client(node(SERVER_JS, "stdio"), **options) as client:
            yield client
    else:
        async with open_http_client(request.getfixturevalue("http_url"), **options) as client:
            yield client


def text_of(result: dict[str, Any]) -> str:
    assert not result.get("isError"), result
    return str(result["content"][0]["text"])


def check_state_echoes(records: list[TraceRecord], rounds: int) -> None:
    """Each retry carried exactly the requestState of the result it answers."""
    flow = [r for r in records if r.flow is not None]
    received = {
        r.round: r.msg["result"]["requestState"]
        for r in flow
        if r.dir == "recv" and r.msg.get("result", {}).get("resultType") == "input_required"
    }
    sent = {r.round: r.msg["params"].get("requestState") for r in flow if r.dir == "send"}
    assert len(received) == rounds
    for round_, state in received.items():
        assert state.startswith("v1.")  # the SDK codec's sealed format, opaque to us
        assert sent[round_] == state  # a result is traced with the round it opens
    assert sent[0] is None  # the first leg carries none


async def common_flows(client: Client) -> None:
    """What both eras must carry: each kind of question, several at once, prompt, resource."""
    assert text_of(await client.call_tool("greet")) == "Hello, Ada!"
    assert text_of(await client.call_tool("ask_llm")) == "llm said: hi-from-llm"
    assert text_of(await client.call_tool("list_roots")) == "roots: file:///workspace"
    three = "name=Ada llm=hi-from-llm roots=file:///workspace rounds=3"
    assert text_of(await client.call_tool("three_rounds")) == three
    assert text_of(await client.call_tool("all_at_once")) == "name=Ada llm=hi-from-llm roots=1"
    assert text_of(await client.call_tool("state_only", {"legs": 3})) == "state-only legs=3"
    prompt = await client.call("prompts/get", {"name": "haiku"})
    assert prompt["messages"][0]["content"]["text"] == "haiku about Ada"
    read = await client.call("resources/read", {"uri": "peer://secret"})
    assert read["contents"][0]["text"] == "the secret, for Ada"
    assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_2026_flows_with_sealed_state(transport: str, request: pytest.FixtureRequest) -> None:
    records: list[TraceRecord] = []
    with trio.fail_after(60):
        async with connect(transport, "modern", request, tracer=records.append) as client:
            assert (client.era, client.protocol_version) == ERAS["modern"]
            assert client.peer_info is not None
            assert client.peer_info["name"] == "peer-ts-server"
            tools = {tool["name"] for tool in await client.list_tools()}
            assert {"greet", "three_rounds", "all_at_once", "state_only", "add"} <= tools
            result = await client.call_tool("three_rounds")
            assert text_of(result) == "name=Ada llm=hi-from-llm roots=file:///workspace rounds=3"
            check_state_echoes(records, 3)
            await common_flows(client)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_2026_changed_state_is_refused_and_a_decline_is_an_answer(
    transport: str, request: pytest.FixtureRequest
) -> None:
    async def decline(key: str, asked: m.wire.InputRequest) -> Any:
        if isinstance(asked, m.wire.ElicitFormRequest):
            return m.wire.ElicitResult(action="decline")
        return await answer(key, asked)

    with trio.fail_after(60):
        async with connect(transport, "modern", request, answer=decline) as client:
            params = {"name": "state_only", "arguments": {"legs": 1}}
            first = await client.request("tools/call", params)  # manual mode: one leg
            assert first["resultType"] == "input_required"
            state = first["requestState"]
            changed = tampered(state)
            with pytest.raises(CallError) as caught:
                await client.request("tools/call", {**params, "requestState": changed})
            assert caught.value.code == m.ErrorCode.INVALID_PARAMS
            assert "Invalid or expired requestState" in str(caught.value)
            # The state minted for tools/call is bound to it: prompts/get refuses it too.
            with pytest.raises(CallError) as caught:
                await client.request("prompts/get", {"name": "haiku", "requestState": state})
            assert caught.value.code == m.ErrorCode.INVALID_PARAMS
            honest = await client.request("tools/call", {**params, "requestState": state})
            assert text_of(honest) == "state-only legs=1"
            result = await client.call_tool("all_at_once")
            assert text_of(result) == "name=decline llm=hi-from-llm roots=1"


async def test_2025_stdio_session_answers_the_sdks_server_requests() -> None:
    asked: list[str] = []

    async def record(key: str, request: m.wire.InputRequest) -> Any:
        asked.append(type(request).__name__)
        return await answer(key, request)

    with trio.fail_after(60):
        async with open_stdio_client(
            node(SERVER_JS, "stdio"), answer=record, era="legacy"
        ) as client:
            assert (client.era, client.protocol_version) == ERAS["legacy"]
            assert client.peer_info is not None
            assert client.peer_info["name"] == "peer-ts-server"
            await common_flows(client)
    # The SDK's legacy shim asked with real requests: greet, ask_llm, list_roots, three
    # rounds, three at once, the prompt and the resource (state_only and add ask nothing).
    assert asked.count("ElicitFormRequest") == 5
    assert asked.count("CreateMessageRequest") == 3
    assert asked.count("ListRootsRequest") == 3


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_2026_http_in_each_response_mode(mode: str) -> None:
    # createMcpHandler's responseMode: "json" never streams, "sse" always does (the fixture
    # above runs the default "auto", a JSON body unless something precedes the result).
    records: list[TraceRecord] = []
    with ts_http_server(mode) as url, trio.fail_after(60):
        async with open_http_client(url, answer=answer, tracer=records.append) as client:
            assert (client.era, client.protocol_version) == ERAS["modern"]
            result = await client.call_tool("three_rounds")
            assert text_of(result) == "name=Ada llm=hi-from-llm roots=file:///workspace rounds=3"
            check_state_echoes(records, 3)
            await common_flows(client)


@pytest.mark.parametrize(
    ("transport", "era"),
    [("stdio", "modern"), ("stdio", "legacy"), ("http", "modern")],
)
async def test_url_elicitation(transport: str, era: str, request: pytest.FixtureRequest) -> None:
    shown: list[m.wire.ElicitUrlRequest] = []

    async def open_page(key: str, asked: m.wire.InputRequest) -> Any:
        assert isinstance(asked, m.wire.ElicitUrlRequest)
        shown.append(asked)
        return m.wire.ElicitResult(action="accept")

    capabilities = {"elicitation": {"url": {}}}
    with trio.fail_after(60):
        async with connect(
            transport, era, request, answer=open_page, capabilities=capabilities
        ) as client:
            assert client.era == ERAS[era][0]
            assert text_of(await client.call_tool("sign_in")) == "sign-in accept"
    assert [(a.message, a.url) for a in shown] == [
        ("Sign in to the peer", "https://peer.example/login?x=1")
    ]


async def test_2025_http_plain_calls_and_the_sdks_stateless_legacy_limit(http_url: str) -> None:
    # The SDK serves 2025 HTTP statelessly (createMcpHandler's legacy: 'stateless'): a fresh
    # instance per POST, no Mcp-Session-Id, so its shim cannot send server-to-client requests
    # and answers an asking tool with isError (its documented limit, not ours).
    with trio.fail_after(60):
        async with open_http_client(http_url, answer=answer, era="legacy") as client:
            assert (client.era, client.protocol_version) == ERAS["legacy"]
            assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
            refused = await client.call_tool("greet")
            assert refused.get("isError") is True
            assert "per-request legacy serving" in refused["content"][0]["text"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_mrtr_call_runs_three_rounds(
    transport: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if transport == "stdio":
        target = "stdio:" + shlex.join(node(SERVER_JS, "stdio"))
    else:
        target = request.getfixturevalue("http_url")
    trace = tmp_path / "trace.ndjson"
    ran = await mrtr(
        "call",
        *("--answer", 'name={"action": "accept", "content": {"name": "Grace"}}'),
        *("--answer", 'sampling/createMessage="from the cli"'),
        *("--root", "file:///cli/root", "--trace", str(trace)),
        *(target, "three_rounds"),
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert text_of(ran.json()) == "name=Grace llm=from the cli roots=file:///cli/root rounds=3"
    messages = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [r["msg"] for r in messages if r["msg"].get("method") == "tools/call"]
    states = [
        r["msg"]["result"]["requestState"]
        for r in messages
        if r["msg"].get("result", {}).get("resultType") == "input_required"
    ]
    assert len(calls) == 4 and len(states) == 3
    assert [c["params"].get("requestState") for c in calls] == [None, *states]
