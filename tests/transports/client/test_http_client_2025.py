"""Our HTTP client against a 2025-only Streamable HTTP server: the official ``mcp`` 2.3.0
server in session mode (tests/support/peer_mcp_legacy_http.py), a real subprocess on
127.0.0.1 that logs every request it reads, so the tests assert from the wire.

Its tools ask with real server-to-client requests on the POST's SSE stream
(elicitation, sampling, roots); one closes its own stream mid-call, so the answer
only arrives on the stream resumed with ``Last-Event-ID``.  ``mrtr call`` runs the
same tools as a subprocess.  The session-expiry and bounds cases use the scripted
server of tests/support/peer_http_server.py.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.client.errors import CallTimeout, TransportError
from mrtr_transports.client.http import open_http_client
from support.cli_run import mrtr
from support.peer_http_server import PeerHttpServer, Reply, Seen, json_reply, result, sse_reply

import mrtr_core as m
from mrtr_core import Verdict

pytestmark = pytest.mark.subprocess

PEER = str(Path(__file__).resolve().parents[2] / "support" / "peer_mcp_legacy_http.py")


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    if isinstance(request, m.wire.ElicitFormRequest):
        return m.wire.ElicitResult(action="accept", content={"name": "Ada", "color": "teal"})
    if isinstance(request, m.wire.CreateMessageRequest):
        text = {"type": "text", "text": "hi-from-llm"}
        return m.wire.CreateMessageResult(role="assistant", content=text, model="test-model")
    return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///workspace", name="ws")])


class Legacy:
    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def wire(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        seen = [json.loads(line) for line in lines]
        self.log.write_text("")
        return seen


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Legacy]:
    log = tmp_path_factory.mktemp("wire") / "wire.ndjson"
    process = subprocess.Popen(
        [sys.executable, PEER],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**__import__("os").environ, "MRTR_WIRE_LOG": str(log)},
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 20)
        line = process.stdout.readline().decode() if ready else ""
        assert line.startswith("PORT "), f"the server did not start: {line!r}"
        yield Legacy(f"http://127.0.0.1:{int(line.split()[1])}/mcp", log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_auto_falls_back_to_a_2025_session_and_answers_server_requests(
    legacy: Legacy,
) -> None:
    legacy.wire()
    asked: list[str] = []

    async def record(key: str, request: m.wire.InputRequest) -> Any:
        asked.append(key)
        return await answer(key, request)

    with trio.fail_after(30):
        async with open_http_client(legacy.url, answer=record) as client:
            assert (client.era, client.protocol_version) == ("legacy", "2025-11-25")
            session = client.link.session
            assert session is not None and session.id
            assert text_of(await client.call_tool("resolved")) == "who=Ada llm=hi-from-llm roots=1"
            assert text_of(await client.call_tool("ask_then_sample")) == "name=Ada llm=hi-from-llm"
            assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
            verdict = client.verdict
    assert verdict == Verdict(era="legacy", protocol_version="2025-11-25")
    assert sorted(asked) == [
        "elicitation/create",
        "elicitation/create",
        "roots/list",
        "sampling/createMessage",
        "sampling/createMessage",
    ]
    seen = legacy.wire()
    assert [(s["http"], s["rpc"]) for s in seen[:3]] == [
        ("POST", "server/discover"),
        ("POST", "initialize"),
        ("POST", "notifications/initialized"),
    ]
    assert seen[1]["session"] is None and seen[1]["version"] is None  # initialize: neither
    later = seen[2:]
    assert {s["session"] for s in later} == {session.id}  # every later request carries both
    assert {s["version"] for s in later} == {"2025-11-25"}
    assert ("GET", None) in [(s["http"], s["rpc"]) for s in later]  # the standalone stream
    answers = [s for s in later if s["http"] == "POST" and s["rpc"] is None]
    assert len(answers) == 5  # each answer to a server request is its own POST
    assert seen[-1]["http"] == "DELETE"  # the session ended on close


async def test_a_broken_stream_is_resumed_with_last_event_id(legacy: Legacy) -> None:
    legacy.wire()
    with trio.fail_after(30):
        async with open_http_client(legacy.url, answer=answer, era="legacy") as client:
            result = await client.call_tool("ask_across_a_break")
            assert text_of(result) == "name=Ada color=teal"
    seen = legacy.wire()
    assert seen[0]["rpc"] == "initialize"  # era="legacy": no probe
    resumed = [s for s in seen if s["http"] == "GET" and s["last_event_id"]]
    assert len(resumed) == 1 and resumed[0]["last_event_id"].startswith("ev-")


async def test_a_call_given_up_is_cancelled_with_a_notification(legacy: Legacy) -> None:
    # 2025 HTTP: closing the stream is no cancellation; notifications/cancelled is.
    legacy.wire()
    with trio.fail_after(30):
        async with open_http_client(legacy.url, era="legacy") as client:
            with pytest.raises(CallTimeout):
                await client.call_tool("slow", timeout=0.5)
            assert text_of(await client.call_tool("add", {"a": 1, "b": 1})) == "2"
    seen = [s["rpc"] for s in legacy.wire() if s["http"] == "POST"]
    assert seen.index("notifications/cancelled") > seen.index("tools/call")


async def test_a_legacy_prior_skips_the_probe(legacy: Legacy) -> None:
    legacy.wire()
    prior = Verdict(era="legacy", protocol_version="2025-06-18")
    with trio.fail_after(30):
        async with open_http_client(legacy.url, answer=answer, prior=prior) as client:
            assert (client.era, client.protocol_version) == ("legacy", "2025-06-18")
            assert text_of(await client.call_tool("add", {"a": 1, "b": 1})) == "2"
    methods = [s["rpc"] for s in legacy.wire()]
    assert "server/discover" not in methods and methods[0] == "initialize"


async def test_a_wrong_modern_prior_probes_once_and_recovers(legacy: Legacy) -> None:
    legacy.wire()
    prior = Verdict(era="modern", protocol_version="2026-07-28")
    with trio.fail_after(30):
        async with open_http_client(legacy.url, answer=answer, prior=prior) as client:
            assert text_of(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
            assert client.verdict == Verdict(era="legacy", protocol_version="2025-11-25")
    methods = [s["rpc"] for s in legacy.wire() if s["http"] == "POST"]
    assert methods[:3] == ["tools/list", "server/discover", "initialize"]


async def test_mrtr_call_completes_against_the_2025_server(legacy: Legacy, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            {
                "elicitation/create": {"action": "accept", "content": {"name": "Ada"}},
                "sampling/createMessage": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "hi-from-llm"},
                    "model": "m",
                },
            }
        )
    )
    verdicts = tmp_path / "verdicts.json"
    common = ["call", "--answers", str(answers), "--root", "file:///ws"]
    legacy.wire()
    ran = await mrtr(*common, "--verdicts", str(verdicts), legacy.url, "resolved", timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert text_of(ran.json()) == "who=Ada llm=hi-from-llm roots=1"
    assert json.loads(verdicts.read_text()) == {
        legacy.url: {"era": "legacy", "protocolVersion": "2025-11-25"}
    }
    assert "server/discover" in [s["rpc"] for s in legacy.wire()]
    # The remembered verdict: no probe this time.
    ran = await mrtr(
        *common, "--verdicts", str(verdicts), legacy.url, "ask_then_sample", timeout=30
    )
    assert ran.returncode == 0, ran.stderr
    assert text_of(ran.json()) == "name=Ada llm=hi-from-llm"
    assert "server/discover" not in [s["rpc"] for s in legacy.wire()]
    # --era legacy: no probe either; --era modern: the 2025 server refuses (its JSON-RPC
    # error in a 400: exit 3, the server's words shown).
    ran = await mrtr(*common, "--era", "legacy", legacy.url, "add", '{"a": 4, "b": 5}', timeout=30)
    assert ran.returncode == 0 and text_of(ran.json()) == "9", ran.stderr
    assert next(s["rpc"] for s in legacy.wire()) == "initialize"
    ran = await mrtr(*common, "--era", "modern", legacy.url, "add", '{"a": 4, "b": 5}', timeout=30)
    assert ran.returncode == 3 and "Unsupported protocol version" in ran.stderr


# --- Scripted servers: expiry and bounds ------------------------------------------------------


def scripted_2025(session_id: Any, expire_after: int | None = None) -> PeerHttpServer:
    """A 2025 server assigning ``session_id``; with ``expire_after``, every request
    after that many tools/call answers gets 404 (the session expired)."""
    calls = 0

    async def handle(seen: Seen) -> Reply:
        nonlocal calls
        if seen.method == "GET":
            return Reply(405, [], [])
        if seen.method == "DELETE":
            return Reply(200, [], [])
        method = seen.rpc_method
        if method == "server/discover":
            return Reply(400, [("Content-Type", "text/plain")], [b"Bad Request"])
        if method == "initialize":
            value = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"},
            }
            reply = json_reply(result(seen, value))
            reply.headers.append(("Mcp-Session-Id", session_id))
            return reply
        if seen.headers.get("mcp-session-id") != session_id:
            return Reply(400, [], [b"no session"])
        if method is None or method.startswith("notifications/"):
            return Reply(202, [], [])
        if expire_after is not None and calls >= expire_after:
            return Reply(404, [("Content-Type", "text/plain")], [b"session expired"])
        calls += 1
        if method == "tools/list":
            return json_reply(result(seen, {"tools": [{"name": "t", "inputSchema": {}}]}))
        return sse_reply([result(seen, {"content": [{"type": "text", "text": "ok"}]})])

    return PeerHttpServer(handle)


async def test_a_404_with_the_session_id_is_a_clear_session_error() -> None:
    server = scripted_2025("sess-1", expire_after=1)  # one call, then expiry
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(server.run)
            async with open_http_client(url) as client:
                assert text_of(await client.call_tool("t")) == "ok"
                with pytest.raises(TransportError) as caught:
                    await client.call_tool("t")
                with pytest.raises(TransportError):  # every later call fails the same way
                    await client.call_tool("t")
            nursery.cancel_scope.cancel()
    error = caught.value
    assert (error.kind, error.status) == ("session", 404)
    assert "ended the 2025 session 'sess-1'" in error.message
    assert "open a new client" in error.message
    assert "DELETE" not in [seen.method for seen in server.seen]  # nothing left to delete


@pytest.mark.parametrize("bad", [b"has space", b"x" * 2000, b"caf\xe9", b"tab\there"])
async def test_a_malformed_session_id_is_refused(bad: bytes) -> None:
    server = scripted_2025(bad)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(server.run)
            with pytest.raises(TransportError) as caught:
                async with open_http_client(url):
                    raise AssertionError("opened a session")
            nursery.cancel_scope.cancel()
    assert "invalid Mcp-Session-Id" in caught.value.message


def sse_event(
    message: dict[str, Any], event_id: str | None = None, retry: int | None = None
) -> bytes:
    head = (f"id: {event_id}\n" if event_id else "") + (f"retry: {retry}\n" if retry else "")
    return (head + f"data: {json.dumps(message)}\n\n").encode()


class Scripted2025:
    """A 2025 session server whose ``tools/call`` and GET answers the test scripts."""

    def __init__(self, on_call: Any, on_get: Any) -> None:
        self.on_call, self.on_get = on_call, on_get
        self.server = PeerHttpServer(self.handle)

    async def handle(self, seen: Seen) -> Reply:
        if seen.method == "GET":
            return await self.on_get(seen)
        if seen.method == "DELETE":
            return Reply(200, [], [])
        method = seen.rpc_method
        if method == "initialize":
            value = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"},
            }
            reply = json_reply(result(seen, value))
            reply.headers.append(("Mcp-Session-Id", "s-1"))
            return reply
        if method == "tools/call":
            return await self.on_call(seen)
        return Reply(202, [], [])  # notifications and our answers


SSE = [("Content-Type", "text/event-stream")]


async def test_the_get_stream_carries_server_requests_and_is_resumed() -> None:
    gets: list[Seen] = []

    async def on_get(seen: Seen) -> Reply:
        gets.append(seen)
        if len(gets) == 1:  # a ping on the standalone stream, then it breaks
            ping = {"jsonrpc": "2.0", "id": "p-1", "method": "ping"}
            return Reply(200, SSE, [sse_event(ping, "g-1", retry=50), b": more\n"], break_after=1)
        return Reply(200, SSE, [sse_event({"jsonrpc": "2.0", "id": "p-2", "method": "ping"})])

    async def on_call(seen: Seen) -> Reply:
        return json_reply(result(seen, {"content": [{"type": "text", "text": "ok"}]}))

    peer = Scripted2025(on_call, on_get)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(peer.server.run)
            async with open_http_client(url, era="legacy") as client:
                while len([s for s in peer.server.seen if s.body and "result" in s.body]) < 2:
                    await trio.sleep(0.02)
                assert text_of(await client.call_tool("t")) == "ok"
            nursery.cancel_scope.cancel()
    answered = [s.body for s in peer.server.seen if s.method == "POST" and "result" in s.body]
    assert answered == [
        {"jsonrpc": "2.0", "id": "p-1", "result": {}},
        {"jsonrpc": "2.0", "id": "p-2", "result": {}},
    ]
    assert [g.headers.get("last-event-id") for g in gets] == [None, "g-1"]
    assert all(g.headers["mcp-session-id"] == "s-1" for g in gets)


async def test_resuming_a_broken_answer_stream_is_bounded() -> None:
    # The call's stream breaks after one event with an id, and every resumption breaks
    # with nothing new: three attempts (each after the server's retry), then the call fails.
    resumed: list[Seen] = []

    async def on_call(seen: Seen) -> Reply:
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
        return Reply(200, SSE, [sse_event(note, "c-1", retry=20), b"x"], break_after=1)

    async def on_get(seen: Seen) -> Reply:
        if "last-event-id" not in seen.headers:
            return Reply(405, [], [])
        resumed.append(seen)
        return Reply(200, SSE, [b": nothing new\n\n", b"x"], break_after=1)

    peer = Scripted2025(on_call, on_get)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(peer.server.run)
            async with open_http_client(url, era="legacy") as client:
                with pytest.raises(TransportError) as caught:
                    await client.call_tool("t")
            nursery.cancel_scope.cancel()
    assert len(resumed) == 3 and {s.headers["last-event-id"] for s in resumed} == {"c-1"}
    assert "could not be resumed (3 attempts)" in caught.value.message
    # A 2025 request is never sent again (it may have had its effects): one tools/call.
    assert [s.rpc_method for s in peer.server.seen].count("tools/call") == 1


async def test_a_2025_stream_without_event_ids_fails_its_call_once() -> None:
    async def on_call(seen: Seen) -> Reply:
        return Reply(200, SSE, [b": working\n\n", b"x"], break_after=1)

    async def on_get(seen: Seen) -> Reply:
        return Reply(405, [], [])

    peer = Scripted2025(on_call, on_get)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(peer.server.run)
            async with open_http_client(url, era="legacy") as client:
                with pytest.raises(TransportError) as caught:
                    await client.call_tool("t")
            nursery.cancel_scope.cancel()
    assert "no event id to resume from" in caught.value.message
    assert [s.rpc_method for s in peer.server.seen].count("tools/call") == 1


async def test_a_sessions_requests_wait_for_the_get_stream_to_open() -> None:
    # A server may send its requests on the GET stream, unrelated to any POST (the
    # official TypeScript server's elicitInput does), and one sent before that stream
    # exists is lost: a call must not go out before the GET stream is open (the
    # conformance suite's elicitation-sep1034-client-defaults lost its question so,
    # about one run in two on a busy machine).
    times: dict[str, float] = {}

    async def on_get(seen: Seen) -> Reply:
        times["GET"] = trio.current_time()
        return Reply(200, SSE, [b": open\n\n"], hold=True, delay=0.5)  # its head comes late

    async def on_call(seen: Seen) -> Reply:
        times["tools/call"] = trio.current_time()
        return json_reply(result(seen, {"content": [{"type": "text", "text": "ok"}]}))

    peer = Scripted2025(on_call, on_get)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(peer.server.run)
            async with open_http_client(url, era="legacy") as client:
                assert text_of(await client.call_tool("t")) == "ok"
            nursery.cancel_scope.cancel()
    # The call went out only once the GET stream's head had come (0.5 s after the GET).
    assert times["tools/call"] >= times["GET"] + 0.5
