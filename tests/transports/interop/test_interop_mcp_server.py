"""Our client against the official ``mcp`` 2.3.0 ``MCPServer`` (tests/peer_mcp_server.py).

Over stdio (the server a child process) and over Streamable HTTP (the same
server under uvicorn in a subprocess on a free port): multi round-trip flows
with elicitation, sampling and roots, several rounds, several questions in one
round, requestState-only rounds, ``prompts/get``, and a 2025 session where the
SDK asks with server-to-client requests.  ``MCPServer`` seals every
``requestState`` (AES-GCM) and rejects an echo that differs by one byte, so
these flows completing, and the trace showing each retry carrying exactly the
string received, is the byte-exact echo checked end to end.
"""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.client.client import Client, TraceRecord
from mrtr_transports.client.errors import CallError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.stdio import open_stdio_client
from support.tampering import tampered

import mrtr_core as m

PEER = str(Path(__file__).resolve().parents[2] / "support" / "peer_mcp_server.py")


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    if isinstance(request, m.wire.ElicitFormRequest):
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})
    if isinstance(request, m.wire.CreateMessageRequest):
        text = {"type": "text", "text": "hi-from-llm"}
        return m.wire.CreateMessageResult(role="assistant", content=text, model="test-model")
    return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///workspace", name="ws")])


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The SDK server serving Streamable HTTP in a subprocess, for this module."""
    process = subprocess.Popen(
        [sys.executable, PEER, "http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 20)
        line = process.stdout.readline().decode() if ready else ""
        assert line.startswith("PORT "), f"the server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
        assert state.startswith("v1.")  # sealed by MCPServer, opaque to us
        assert sent[round_] == state
    assert sent[0] is None  # the first leg carries none


async def three_rounds_with_trace(client_records: list[TraceRecord], client: Client) -> None:
    result = await client.call_tool("three_rounds")
    assert result["content"][0]["text"] == "name=Ada llm=hi-from-llm roots=file:///workspace"
    check_state_echoes(client_records, 3)


async def common_flows(client: Client) -> None:
    result = await client.call_tool("all_at_once")  # three questions in one round
    assert result["content"][0]["text"] == "name=Ada llm=hi-from-llm roots=1"
    result = await client.call_tool("resolved")  # Resolve(...) markers, batched by the SDK
    assert result["content"][0]["text"] == "who=Ada llm=hi-from-llm roots=1"
    result = await client.call_tool("state_only", {"legs": 3})  # load shedding
    assert result["content"][0]["text"] == "state-only legs=3"
    prompt = await client.call("prompts/get", {"name": "haiku"})
    assert prompt["messages"][0]["content"]["text"] == "haiku about Ada"
    assert (await client.call_tool("add", {"a": 2, "b": 3}))["content"][0]["text"] == "5"


async def test_stdio_multi_round_flows_with_sealed_state() -> None:
    records: list[TraceRecord] = []
    with trio.fail_after(20):
        async with open_stdio_client(
            [sys.executable, PEER, "stdio"], answer=answer, tracer=records.append
        ) as client:
            assert (client.era, client.protocol_version) == ("modern", "2026-07-28")
            assert client.peer_info is not None
            assert client.peer_info["name"] == "peer-mcp-server"
            await three_rounds_with_trace(records, client)
            await common_flows(client)


async def test_stdio_a_changed_state_is_refused_and_a_decline_is_an_answer() -> None:
    async def decline(key: str, request: m.wire.InputRequest) -> Any:
        if isinstance(request, m.wire.ElicitFormRequest):
            return m.wire.ElicitResult(action="decline")
        return await answer(key, request)

    with trio.fail_after(20):
        async with open_stdio_client([sys.executable, PEER, "stdio"], answer=decline) as client:
            params = {"name": "state_only", "arguments": {"legs": 1}}
            first = await client.request("tools/call", params)  # manual mode: one leg
            state = first["requestState"]
            changed = tampered(state)
            with pytest.raises(CallError) as caught:
                await client.request("tools/call", {**params, "requestState": changed})
            assert caught.value.code == m.ErrorCode.INVALID_PARAMS
            result = await client.call_tool("all_at_once")
            assert result["content"][0]["text"] == "name=decline llm=hi-from-llm roots=1"


async def test_stdio_2025_session_answers_the_sdks_server_requests() -> None:
    asked: list[str] = []

    async def record(key: str, request: m.wire.InputRequest) -> Any:
        asked.append(key)
        return await answer(key, request)

    with trio.fail_after(20):
        async with open_stdio_client(
            [sys.executable, PEER, "stdio"], answer=record, era="legacy"
        ) as client:
            assert (client.era, client.protocol_version) == ("legacy", "2025-11-25")
            result = await client.call_tool("resolved")
            assert result["content"][0]["text"] == "who=Ada llm=hi-from-llm roots=1"
    assert sorted(asked) == ["elicitation/create", "roots/list", "sampling/createMessage"]


async def test_http_multi_round_flows_with_sealed_state(http_url: str) -> None:
    records: list[TraceRecord] = []
    with trio.fail_after(20):
        async with open_http_client(http_url, answer=answer, tracer=records.append) as client:
            assert (client.era, client.protocol_version) == ("modern", "2026-07-28")
            await three_rounds_with_trace(records, client)
            tools = {tool["name"] for tool in await client.list_tools()}
            assert {"three_rounds", "resolved", "add"} <= tools
            await common_flows(client)
