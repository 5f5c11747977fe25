"""2025-era Streamable HTTP sessions on the HTTP endpoint, on a real socket, with raw h11.

The conformance fixtures app (``tests/support/conformance_app.py``) is served
on 127.0.0.1 by each kind of server (``kind``): ``HttpServer`` ("mrtr"), and ``McpAsgi`` under
hypercorn's trio worker (in-process: a test may look at the endpoint's sessions) and
under uvicorn (asyncio, a subprocess); each test speaks HTTP/1.1 to it by hand: ``initialize``,
``Mcp-Session-Id``, the request's SSE stream with its priming event and event
ids, the legacy shim's questions on that stream and the answers POSTed back,
the standalone GET stream, ``DELETE``, ``Last-Event-ID`` resumption, and the
bounds (live sessions, idle expiry, the replay buffer).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import h11
import pytest
import trio
from mrtr_transports.asgi.pools import SessionStreams
from support.asgi_hosts import HYPERCORN, UVICORN, hypercorn_serving, uvicorn_serving
from support.conformance_app import build_conformance_app
from test_http_server import HttpPeer, Reply, Served, tool_call
from test_http_server import serving as trio_serving

import mrtr_core as m

VERSION = "2025-11-25"
fixtures_app = build_conformance_app()
Header = tuple[str, str]

#: Every server of the endpoint; those in this process, whose state a test may read.
#: (uvicorn runs as a child process: ``make test`` runs those, ``make check`` leaves them out.)
ALL_KINDS = pytest.mark.parametrize(
    "kind", ["mrtr", HYPERCORN, pytest.param(UVICORN, marks=pytest.mark.subprocess)]
)
IN_PROCESS = pytest.mark.parametrize("kind", ["mrtr", HYPERCORN])


@asynccontextmanager
async def serving(kind: str, app: Any, **options: Any) -> AsyncIterator[Served]:
    """``app`` served by ``kind``, as ``test_http_server.serving`` serves it."""
    if kind == "mrtr":
        async with trio_serving(app, **options) as served:
            yield served
        return
    options.setdefault("keepalive_interval", 0.05)
    if kind == HYPERCORN:
        async with hypercorn_serving(app, **options) as (endpoint, host, port):
            yield Served(endpoint, app, host, port)  # type: ignore[arg-type]
        return
    assert app is fixtures_app  # (what the subprocess serves)
    async with uvicorn_serving(**options) as (_, host, port):
        yield Served(None, app, host, port)  # type: ignore[arg-type]


def initialize(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {
        "protocolVersion": VERSION,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


def request(method: str, params: dict[str, Any] | None = None, rid: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(name: str, arguments: dict[str, Any] | None = None, rid: Any = 1) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments or {}}, rid)


def in_session(session_id: str | None, *extra: Header) -> list[Header]:
    headers = [("MCP-Protocol-Version", VERSION)]
    if session_id is not None:
        headers.append(("Mcp-Session-Id", session_id))
    return [*headers, *extra]


async def open_session(served: Served, capabilities: dict[str, Any] | None = None) -> str:
    reply = await served.post(initialize(capabilities), [])
    assert reply.status == 200, reply
    assert reply.json()["result"]["protocolVersion"] == VERSION
    session_id = reply.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await served.post(note, in_session(session_id))).status == 202
    return session_id


class Stream:
    """An SSE response read as it arrives: its events (with ids) one at a time."""

    def __init__(self, peer: HttpPeer, response: h11.Response) -> None:
        self.peer = peer
        self.status = response.status_code
        self.headers = {k.decode(): v.decode() for k, v in response.headers}
        self.decoder = m.http.SseDecoder()
        self.raw = b""
        self.ended = False

    async def next(self) -> m.http._sse.SseEvent | None:
        """The next event with data; ``None`` when the response ends."""
        while True:
            event = self.decoder.next_event()
            if isinstance(event, m.http._sse.SseEvent):
                if event.data:  # (not the priming event)
                    return event
                continue
            if event is m.wire.END_OF_STREAM:
                return None
            h11_event = await self.peer.next_event()
            if isinstance(h11_event, h11.Data):
                self.raw += h11_event.data
                self.decoder.feed(h11_event.data)
            else:
                assert isinstance(h11_event, h11.EndOfMessage), h11_event
                self.ended = True
                self.decoder.feed_eof()

    async def message(self) -> dict[str, Any] | None:
        event = await self.next()
        return None if event is None else json.loads(event.data)

    async def rest(self) -> list[dict[str, Any]]:
        found = []
        while (message := await self.message()) is not None:
            found.append(message)
        return found


@asynccontextmanager
async def streaming(
    served: Served, message: Any, headers: Sequence[Header], *, method: str = "POST"
) -> AsyncIterator[Stream]:
    async with served.connect() as peer:
        await peer.send_request(message, headers, method=method)
        yield Stream(peer, await peer.head())


def priming_of(stream: Stream) -> tuple[str, int]:
    """The priming event: its id and retry (it has no data, so no event is dispatched)."""
    head = stream.raw.split(b"\n\n", 1)[0].decode()
    fields = dict(line.split(": ", 1) for line in head.splitlines())
    assert fields["data"] == "" if "data" in fields else True
    return fields["id"], int(fields["retry"])


@ALL_KINDS
async def test_initialize_opens_a_session_and_requests_stream_with_event_ids(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app) as served:
            first, second = await open_session(served), await open_session(served)
            assert first != second and len(first) >= 40
            assert all("\x21" <= c <= "\x7e" for c in first)
            async with streaming(served, request("tools/list"), in_session(first)) as stream:
                assert stream.status == 200
                assert stream.headers["content-type"] == "text/event-stream"
                result = await stream.next()
                assert result is not None
                priming, retry = priming_of(stream)
                assert retry > 0
                assert result.id is not None and result.id != priming
                listed = json.loads(result.data)
                assert listed["id"] == 1
                assert "test_elicitation" in {t["name"] for t in listed["result"]["tools"]}
                assert await stream.next() is None  # the response ends the stream
            ping = await served.post(request("ping", rid=9), in_session(first))
            assert ping.json() == {"jsonrpc": "2.0", "id": 9, "result": {}}


@IN_PROCESS
async def test_session_ids_are_required_and_checked(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app, session_idle_timeout=1.0) as served:
            session_id = await open_session(served)
            sse_only = await served.post(initialize(), [], accept="text/event-stream")
            assert sse_only.status == 406 and "mcp-session-id" not in sse_only.headers
            missing = await served.post(request("tools/list"), in_session(None))
            assert missing.status == 400 and "Mcp-Session-Id" in missing.json()["error"]["message"]
            unknown = await served.post(request("tools/list"), in_session("no-such-session"))
            assert unknown.status == 404 and unknown.json()["error"]["code"] == -32600
            malformed = await served.post(request("tools/list"), in_session("bad id"))
            assert malformed.status == 400
            version = [("MCP-Protocol-Version", "1999-01-01"), ("Mcp-Session-Id", session_id)]
            assert (await served.post(request("ping"), version)).status == 400
            # No MCP-Protocol-Version: 2025-03-26 is assumed, and served.
            bare = await served.post(request("ping"), [("Mcp-Session-Id", session_id)])
            assert bare.status == 200
            # A request's answer is a stream: a client must take one.
            json_only = await served.post(
                request("tools/list", rid=3), in_session(session_id), accept="application/json"
            )
            assert json_only.status == 406 and json_only.json()["id"] == 3
            async with streaming(served, request("tools/list", rid=3), in_session(session_id)) as s:
                assert (await s.message() or {})["id"] == 3  # the id was released
            await trio.sleep(1.5)  # idle past session_idle_timeout
            expired = await served.post(request("ping"), in_session(session_id))
            assert expired.status == 404 and "expired" in expired.json()["error"]["message"]
            assert session_id not in served.server.sessions.sessions


@ALL_KINDS
async def test_delete_ends_the_session_and_cancels_its_work(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app) as served:
            session_id = await open_session(served, {"elicitation": {}})
            question = call("test_elicitation", {"message": "who?"})
            async with streaming(served, question, in_session(session_id)) as stream:
                asked = await stream.message()
                assert asked is not None and asked["method"] == "elicitation/create"
                async with served.connect() as peer:
                    gone = await peer.post(None, in_session(session_id), method="DELETE")
                    assert gone.status == 204
                assert await stream.rest() == []  # cancelled: the stream ends, no answer
            again = await served.post(None, in_session(session_id), method="DELETE")
            assert again.status == 404
            after = await served.post(request("ping"), in_session(session_id))
            assert after.status == 404


@ALL_KINDS
async def test_shim_questions_travel_on_the_post_stream_and_answers_come_back(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app) as served:
            session_id = await open_session(served, {"elicitation": {}})
            other = await open_session(served, {"elicitation": {}})
            question = call("test_elicitation", {"message": "Your details?"}, rid="q")
            async with streaming(served, question, in_session(session_id)) as stream:
                asked = await stream.message()
                assert asked is not None and asked["method"] == "elicitation/create"
                assert asked["params"]["message"] == "Your details?"
                content = {"username": "ann", "email": "ann@example.com"}
                answer = {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"action": "accept", "content": content},
                }
                # Another session cannot answer this session's question: its connection
                # asked nothing under that id.
                assert (await served.post(answer, in_session(other))).status == 400
                assert (await served.post(answer, in_session(session_id))).status == 202
                final = await stream.message()
                assert final is not None and final["id"] == "q"
                text = final["result"]["content"][0]["text"]
                assert text.startswith("User response: action=accept") and "ann@" in text
                assert await stream.next() is None


@ALL_KINDS
async def test_the_answer_timeout_ends_a_question_nobody_answers(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app, legacy_answer_timeout=0.2) as served:
            session_id = await open_session(served, {"sampling": {}})
            question = call("test_sampling", {"prompt": "hi"})
            async with streaming(served, question, in_session(session_id)) as stream:
                asked = await stream.message()
                assert asked is not None and asked["method"] == "sampling/createMessage"
                withdrawn, final = await stream.rest()
                assert withdrawn["method"] == "notifications/cancelled"
                assert withdrawn["params"]["requestId"] == asked["id"]
                assert final["id"] == 1 and final["error"]["code"] == -32603
                assert "did not answer in time" in final["error"]["message"]


@ALL_KINDS
async def test_a_cut_stream_resumes_with_last_event_id(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app) as served:
            session_id = await open_session(served)
            async with streaming(served, call("test_reconnection"), in_session(session_id)) as s:
                assert await s.next() is None  # closed mid-call, before the answer
                priming, _ = priming_of(s)
            await trio.sleep(0.3)  # the answer is recorded meanwhile
            resume = in_session(session_id, ("Last-Event-ID", priming))
            async with streaming(served, None, resume, method="GET") as again:
                assert again.status == 200
                event = await again.next()
                assert event is not None and event.id is not None
                assert json.loads(event.data)["result"]["content"][0]["text"].startswith(
                    "Reconnection"
                )
                assert await again.next() is None
            # Another session knows no such stream: no session reads another's events.
            other = await open_session(served)
            foreign = in_session(other, ("Last-Event-ID", priming))
            refused = await served.post(None, foreign, method="GET", accept="text/event-stream")
            assert refused.status == 400 and "no such stream" in refused.json()["error"]["message"]
            bogus = in_session(session_id, ("Last-Event-ID", "not-an-id"))
            refused = await served.post(None, bogus, method="GET", accept="text/event-stream")
            assert refused.status == 400


@ALL_KINDS
async def test_a_client_that_leaves_does_not_cancel_and_can_come_back(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app) as served:
            session_id = await open_session(served)
            logging_call = call("test_tool_with_logging", rid=5)
            async with served.connect() as peer:
                await peer.send_request(logging_call, in_session(session_id))
                stream = Stream(peer, await peer.head())
                first = await stream.next()  # the first log line
                assert first is not None and first.id is not None
            await trio.sleep(0.4)  # the tool runs on without a reader
            resume = in_session(session_id, ("Last-Event-ID", first.id))
            async with streaming(served, None, resume, method="GET") as again:
                rest = await again.rest()
            assert [m.get("params", {}).get("data") for m in rest[:2]] == [
                "Tool processing data",
                "Tool execution completed",
            ]
            assert rest[-1]["id"] == 5 and "result" in rest[-1]


@IN_PROCESS
async def test_the_replay_buffer_is_bounded_and_a_lost_id_is_refused(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app, replay_buffer_events=2) as served:
            session_id = await open_session(served)
            async with served.connect() as peer:
                await peer.send_request(call("test_tool_with_logging"), in_session(session_id))
                stream = Stream(peer, await peer.head())
                first = await stream.next()
                assert first is not None
            await trio.sleep(0.4)  # three more events: only the last two are kept
            session = served.server.sessions.sessions[session_id]
            assert session.buffer.size[0] <= 2
            resume = in_session(session_id, ("Last-Event-ID", first.id))
            refused = await served.post(None, resume, method="GET", accept="text/event-stream")
            assert refused.status == 400 and "no longer held" in refused.json()["error"]["message"]


@ALL_KINDS
async def test_one_standalone_stream_per_session(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app) as served:
            session_id = await open_session(served)
            async with streaming(served, None, in_session(session_id), method="GET") as first:
                assert first.status == 200
                second = await served.post(
                    None, in_session(session_id), method="GET", accept="text/event-stream"
                )
                assert second.status == 409
                subscribe = request("resources/subscribe", {"uri": "test://watched-resource"})
                async with streaming(served, subscribe, in_session(session_id)) as done:
                    assert (await done.message() or {})["result"] == {}
                trigger = call("test_trigger_resource_update", rid=2)
                async with streaming(served, trigger, in_session(session_id)) as done:
                    await done.rest()
                update = await first.message()
                primed, _ = priming_of(first)  # the GET stream is primed too
                assert primed.startswith("0-")
                assert update == {
                    "jsonrpc": "2.0",
                    "method": "notifications/resources/updated",
                    "params": {"uri": "test://watched-resource"},
                }
                async with served.connect() as peer:
                    await peer.post(None, in_session(session_id), method="DELETE")
                assert await first.next() is None  # the session ended: so did its stream
            no_sse = await served.post(None, in_session(session_id), method="GET")
            assert no_sse.status in (404, 406)


@IN_PROCESS
async def test_the_live_session_bound(kind: str) -> None:
    # (Adapted for issue 22: an open GET stream no longer makes a session busy, so the
    # sessions are made busy by requests waiting for an answer; and one client past its
    # share, here the whole table, is refused with 429, while another client meets the
    # full table's 503.)
    with trio.fail_after(10):
        options = {"max_sessions": 2, "trusted_proxies": ["127.0.0.1"]}
        async with serving(kind, fixtures_app, **options) as served:
            oldest = await open_session(served)
            newer = await open_session(served, {"elicitation": {}})
            assert (await served.post(request("ping"), in_session(newer))).status == 200
            newest = await open_session(served, {"elicitation": {}})  # full: idle longest ends
            assert (await served.post(request("ping"), in_session(oldest))).status == 404
            # Both sessions busy (a request waiting for its answer each): a newcomer is refused.
            ask = call("test_elicitation", {"message": "wait"}, rid="wait")
            async with (
                streaming(served, ask, in_session(newer)) as one,
                streaming(served, ask, in_session(newest)) as two,
            ):
                assert await one.message() is not None and await two.message() is not None
                refused = await served.post(initialize(), [])
                assert refused.status == 429 and refused.headers["retry-after"] == "1"
                assert refused.json()["error"]["code"] == m.ErrorCode.SERVER_BUSY
                assert "max_sessions_per_client=2" in refused.json()["error"]["message"]
                other = await served.post(initialize(), [("X-Forwarded-For", "10.0.0.9")])
                assert other.status == 503 and other.headers["retry-after"] == "1"
                assert other.json()["error"]["code"] == m.ErrorCode.SERVER_BUSY
                assert "max_sessions=2" in other.json()["error"]["message"]
            assert len(served.server.sessions.sessions) == 2


@ALL_KINDS
async def test_both_eras_on_one_server_at_once(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app) as served:
            session_id = await open_session(served, {"elicitation": {}})
            question = call("test_input_required_result_elicitation", rid=1)
            async with streaming(served, question, in_session(session_id)) as legacy:
                asked = await legacy.message()
                assert asked is not None and asked["method"] == "elicitation/create"
                # Meanwhile a 2026-07-28 client gets an input_required result, no session.
                modern = tool_call("test_input_required_result_elicitation")
                modern["params"]["_meta"][m.wire.META_CLIENT_CAPABILITIES] = {"elicitation": {}}
                reply: Reply = await served.post(
                    modern,
                    [
                        ("MCP-Protocol-Version", "2026-07-28"),
                        ("Mcp-Method", "tools/call"),
                        ("Mcp-Name", "test_input_required_result_elicitation"),
                    ],
                )
                assert reply.status == 200 and "mcp-session-id" not in reply.headers
                assert reply.json()["result"]["resultType"] == "input_required"
                answer = {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"action": "accept", "content": {"name": "Ada"}},
                }
                assert (await served.post(answer, in_session(session_id))).status == 202
                final = await legacy.message()
                assert final is not None
                assert final["result"]["content"][0]["text"] == "Hello, Ada!"


def test_the_session_streams_pool_counts_per_session_and_in_all() -> None:
    # (issue 22: a per-client share too, and a refusal is a ShareRefusal, not a str)
    pool = SessionStreams(max_streams=3, per_session=2, per_client=3)
    assert pool.admit("a", "x") is None and pool.admit("a", "x") is None
    refused = pool.admit("a", "x")
    assert refused is not None and refused.status == 503
    assert "max_streams_per_session=2" in refused.message
    assert pool.admit("b", "y") is None
    refused = pool.admit("c", "z")
    assert refused is not None and refused.status == 503
    assert "max_session_streams=3" in refused.message
    assert len(pool) == 3
    pool.release("a", "x")
    pool.release("a", "x")
    pool.release("a", "x")  # more releases than places change nothing
    pool.release("nobody", "x")
    assert len(pool) == 1 and pool.admit("c", "z") is None


def test_the_session_streams_pool_gives_one_client_a_share() -> None:
    pool = SessionStreams(max_streams=4, per_session=2, per_client=2)
    assert pool.admit("a", "x") is None and pool.admit("b", "x") is None
    refused = pool.admit("c", "x")  # a third session of the same client
    assert refused is not None and refused.status == 429
    assert "max_session_streams_per_client=2" in refused.message
    assert pool.admit("c", "y") is None  # another client is not refused


async def test_session_streams_leave_the_connection_slots_for_their_own_pool() -> None:
    with trio.fail_after(10):
        options = {"max_streams_per_session": 1, "max_connections": 2}
        async with serving("mrtr", fixtures_app, **options) as served:
            session_id = await open_session(served, {"elicitation": {}})
            question = call("test_elicitation", {"message": "wait"}, rid="w")
            async with streaming(served, question, in_session(session_id)) as waiting:
                asked = await waiting.message()
                assert asked is not None
                assert waiting.headers["connection"] == "close"  # it left the slots
                # The session's one stream is taken: a second request is refused, retryably.
                busy = await served.post(request("tools/list", rid=2), in_session(session_id))
                assert busy.status == 503 and busy.headers["retry-after"] == "1"
                assert busy.json()["error"]["code"] == m.ErrorCode.SERVER_BUSY
                # Other clients still find both connection slots free.
                other = await open_session(served)
                async with served.connect() as one, served.connect() as two:
                    for peer in (one, two):
                        assert (await peer.post(request("ping"), in_session(other))).status == 200
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}
                assert (await served.post(answer, in_session(session_id))).status == 202
                final = await waiting.message()
                assert final is not None and final["id"] == "w"
                assert await waiting.next() is None
            while len(served.server.sessions.streams):  # its place is given back
                await trio.sleep(0.01)


@IN_PROCESS
async def test_a_request_whose_client_left_keeps_its_place_until_it_ends(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app, max_streams_per_session=1) as served:
            session_id = await open_session(served, {"elicitation": {}})
            question = call("test_elicitation", {"message": "still there?"}, rid="left")
            async with streaming(served, question, in_session(session_id)) as left:
                asked = await left.message()
                assert asked is not None
            # Its client is gone, the request waits on: the session has no place left.
            busy = await served.post(request("tools/list", rid=2), in_session(session_id))
            assert busy.status == 503
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "cancel"}}
            assert (await served.post(answer, in_session(session_id))).status == 202
            while len(served.server.sessions.streams):  # the request ended: its place is free
                await trio.sleep(0.01)
            async with streaming(served, request("tools/list", rid=3), in_session(session_id)) as s:
                assert (await s.message() or {})["id"] == 3


@IN_PROCESS
async def test_a_server_without_2025_versions_refuses_initialize_and_keeps_no_session(
    kind: str,
) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app, versions=("2026-07-28",), max_sessions=1) as served:
            refused = await served.post(initialize(), [])
            assert refused.status == 400 and "mcp-session-id" not in refused.headers
            assert refused.json()["error"]["code"] == m.ErrorCode.METHOD_NOT_FOUND
            assert refused.json()["error"]["data"] == {"supported": ["2026-07-28"]}
            assert len(served.server.sessions.table) == 0
            json_only = await served.post(initialize(), [], accept="text/event-stream")
            assert json_only.status == 400  # (refused before its Accept matters)
            batch = await served.post([initialize()], [("MCP-Protocol-Version", "2025-03-26")])
            assert batch.status == 400 and "batches" in batch.json()["error"]["message"]


@ALL_KINDS
async def test_the_standalone_stream_resumes_too(kind: str) -> None:
    with trio.fail_after(10):
        async with serving(kind, fixtures_app) as served:
            session_id = await open_session(served)
            async with streaming(served, None, in_session(session_id), method="GET") as first:
                assert first.status == 200
                while b"\n\n" not in first.raw:  # the priming event
                    event = await first.peer.next_event()
                    assert isinstance(event, h11.Data)
                    first.raw += event.data
                primed, _ = priming_of(first)
            await trio.sleep(0.05)  # the server notices the reader left
            trigger = call("test_trigger_tool_change")
            async with streaming(served, trigger, in_session(session_id)) as done:
                await done.rest()
            resume = in_session(session_id, ("Last-Event-ID", primed))
            async with streaming(served, None, resume, method="GET") as again:
                changed = await again.message()
                assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            async with streaming(served, trigger, in_session(session_id)) as done:
                await done.rest()  # toggled back: the fixtures app is as it was
