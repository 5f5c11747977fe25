"""The official ``mcp`` 2.3.0 client against our servers (stdio and Streamable HTTP).

Our servers run as real subprocesses serving ``srv_apps.TestApp``; the ``mcp``
client runs here on asyncio (``anyio.run``), so these tests are plain
functions.  Its elicitation, sampling and roots callbacks answer the app's
input requests: in 2026-07-28 mode as MRTR rounds, in legacy mode as real
server-to-client requests made by our legacy shim.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from support.conformance_suite import FIXTURES_APP

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
APP = ["--app", "support.srv_apps:TestApp"]


def server_env() -> dict[str, str]:
    paths = [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def stdio_server() -> StdioServerParameters:
    args = ["-m", "mrtr_transports", "serve", "--stdio", *APP]
    return StdioServerParameters(command=sys.executable, args=args, env=server_env(), cwd=ROOT)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """Our HTTP server as a subprocess on a free port; its endpoint URL."""
    argv = [sys.executable, "-m", "mrtr_transports", "serve", "--http", "127.0.0.1:0", *APP]
    process = subprocess.Popen(argv, cwd=ROOT, env=server_env(), stderr=subprocess.PIPE)
    assert process.stderr is not None
    try:
        ready, _, _ = select.select([process.stderr], [], [], 10.0)
        assert ready, "the HTTP server did not start within 10 s"
        line = process.stderr.readline().decode()
        assert line.startswith("mrtr serve: listening on http://127.0.0.1:"), line
        # Keep reading its stderr so the server never blocks on a full pipe.
        threading.Thread(target=process.stderr.read, daemon=True).start()
        yield line.split()[-1]
    finally:
        process.terminate()
        process.wait(timeout=5)


class Answers:
    """The client's side of every input request, recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []
        self.logs: list[Any] = []
        self.progress: list[tuple[float, float | None, str | None]] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(("elicitation", params.message))
        return types.ElicitResult(action="accept", content={"city": "Oslo"})

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append(("sampling", params.max_tokens))
        content = types.TextContent(type="text", text="crisp and clear")
        return types.CreateMessageResult(role="assistant", content=content, model="test-llm")

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append(("roots", None))
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/data", name="data")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.data))

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    def client(self, server: Any, **options: Any) -> Client:
        return Client(
            server,
            elicitation_callback=self.elicit,
            sampling_callback=self.sample,
            list_roots_callback=self.roots,
            logging_callback=self.log,
            **options,
        )


def text_of(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def exercise(client: Client, answers: Answers) -> None:
    """The MRTR flows every transport and era must carry."""
    trip = await client.call_tool("trip", {})  # two rounds: elicitation, then sampling
    assert text_of(trip) == "Trip to Oslo: crisp and clear"
    assert answers.asked == [("elicitation", "Which city?"), ("sampling", 20)]
    assert text_of(await client.call_tool("roots", {})) == "file:///srv/data"
    paused = await client.call_tool("pause", {})  # a round with only requestState
    assert text_of(paused) == "resumed after a state-only round"
    progressed = await client.call_tool("progress", {}, progress_callback=answers.on_progress)
    assert text_of(progressed) == "progressed"
    assert answers.progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


def test_stdio_server_with_the_2026_client() -> None:
    async def main() -> None:
        answers = Answers()
        with anyio.fail_after(10):
            async with answers.client(stdio_server(), log_level="info") as client:
                assert client.protocol_version == "2026-07-28"  # probed with server/discover
                assert client.server_info is not None and client.server_info.name == "srv-test"
                listed = await client.list_tools()
                assert (listed.ttl_ms, listed.cache_scope) == (0, "private")
                assert "trip" in {tool.name for tool in listed.tools}
                await exercise(client, answers)
        assert answers.logs == [("info", {"note": "halfway"})]  # info and up, as opted in

    anyio.run(main)


def test_http_server_with_the_2026_client(http_url: str) -> None:
    async def main() -> None:
        answers = Answers()
        with anyio.fail_after(10):
            async with answers.client(http_url, log_level="info") as client:
                assert client.protocol_version == "2026-07-28"
                listed = await client.list_tools()
                assert (listed.ttl_ms, listed.cache_scope) == (0, "private")
                await exercise(client, answers)
                # The client mirrors x-mcp-header arguments; the server checks them.
                arguments = {"region": "Zürich", "count": 3, "flag": True, "opts": {"tenant": "t"}}
                headers = await client.call_tool("headers", arguments)
                assert text_of(headers).startswith("headers ok")
        assert answers.logs == [("info", {"note": "halfway"})]

        # A client that cannot sample is never asked to: -32021 names what it lacks.
        async with Client(http_url) as bare:
            with pytest.raises(MCPError) as caught:
                await bare.call_tool("ask_sampling", {})
            assert caught.value.error.code == -32021
            assert caught.value.error.data == {"requiredCapabilities": {"sampling": {}}}

    anyio.run(main)


def test_stdio_server_with_the_legacy_client_through_the_shim() -> None:
    async def main() -> None:
        answers = Answers()
        with anyio.fail_after(10):
            async with answers.client(stdio_server(), mode="legacy") as client:
                assert client.protocol_version == "2025-11-25"  # initialize, not discover
                await exercise(client, answers)
        # 2025 has no per-request logLevel: every line is sent (logging/setLevel is the app's).
        assert answers.logs == [("info", {"note": "halfway"}), ("debug", "too chatty")]

    anyio.run(main)


# --- 2025-era sessions over HTTP --------------------------------------------------------------


def test_http_server_with_the_legacy_client_through_the_shim(http_url: str) -> None:
    """``initialize``, ``Mcp-Session-Id``, the shim's questions on each POST's SSE stream."""

    async def main() -> None:
        answers = Answers()
        with anyio.fail_after(15):
            async with answers.client(http_url, mode="legacy") as client:
                assert client.protocol_version == "2025-11-25"
                await exercise(client, answers)
        assert answers.logs == [("info", {"note": "halfway"}), ("debug", "too chatty")]

    anyio.run(main)


@pytest.fixture(scope="module")
def fixtures_url() -> Iterator[str]:
    """``mrtr serve --http`` with the conformance fixtures app."""
    argv = [sys.executable, "-m", "mrtr_transports.cli.main", "serve", "--http", "127.0.0.1:0"]
    argv += ["--app", FIXTURES_APP]
    process = subprocess.Popen(argv, cwd=ROOT, env=server_env(), stderr=subprocess.PIPE)
    assert process.stderr is not None
    try:
        ready, _, _ = select.select([process.stderr], [], [], 15.0)
        assert ready, "mrtr serve --http did not start within 15 s"
        line = process.stderr.readline().decode()
        assert "listening on http://127.0.0.1:" in line, line
        threading.Thread(target=process.stderr.read, daemon=True).start()
        yield line.split()[-1]
    finally:
        process.terminate()
        process.wait(timeout=5)


class FixtureAnswers:
    """What the conformance fixtures ask, answered as a person and a model would."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        fields = getattr(params, "requested_schema", {}).get("properties", {})
        content: dict[str, Any] = {}
        for name, schema in fields.items():
            content[name] = {"boolean": True, "string": f"my {name}"}.get(schema.get("type"))
        return types.ElicitResult(action="accept", content=content)

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append("sampling")
        content = types.TextContent(type="text", text="Paris")
        return types.CreateMessageResult(role="assistant", content=content, model="test-llm")

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


def test_the_mrtr_fixtures_reach_a_legacy_client_through_the_shim(fixtures_url: str) -> None:
    async def main() -> None:
        answers = FixtureAnswers()
        client = Client(
            fixtures_url,
            mode="legacy",
            elicitation_callback=answers.elicit,
            sampling_callback=answers.sample,
            list_roots_callback=answers.roots,
        )
        with anyio.fail_after(30):
            async with client:
                assert client.protocol_version == "2025-11-25"

                async def tool(name: str) -> str:
                    return text_of(await client.call_tool(f"test_input_required_result_{name}", {}))

                assert await tool("elicitation") == "Hello, my name!"
                assert await tool("sampling") == "The model answered: Paris"
                assert await tool("list_roots") == "Client roots: file:///work"
                assert await tool("request_state") == "state-ok: confirmed=True"
                assert await tool("multiple_inputs") == "Paris my name (1 roots)"
                assert await tool("multi_round") == "my name likes my color."
                assert await tool("tampered_state") == "state verified"
                assert await tool("capabilities") == "answered: sample, ask"
                prompt = await client.get_prompt("test_input_required_result_prompt", {})
                message = prompt.messages[0].content
                assert isinstance(message, types.TextContent)
                assert message.text == "Use this context: my context"
        assert answers.asked.count("sampling") == 3
        assert "Step 2: What is your favorite color?" in answers.asked

    anyio.run(main)


def test_auto_mode_still_picks_2026_on_the_same_server(fixtures_url: str) -> None:
    async def main() -> None:
        with anyio.fail_after(15):
            async with Client(fixtures_url, mode="auto") as client:
                assert client.protocol_version == "2026-07-28"
                simple = await client.call_tool("test_simple_text", {})
                assert text_of(simple) == "This is a simple text response for testing."

    anyio.run(main)
