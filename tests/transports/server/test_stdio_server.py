"""The stdio server as a real subprocess, driven by a client ``mrtr_core.Connection``.

Each test starts ``python -m mrtr_transports serve --stdio --app support.srv_apps:TestApp``
(``tests/`` on PYTHONPATH) and talks to it over its pipes: what the client
connection sends is what goes down stdin, what it reads is every byte of stdout.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.apps.mcp_app import SUBSCRIPTION_ID
from mrtr_transports.cli.app_loading import AppSpecError, load_app
from mrtr_transports.server import driver
from mrtr_transports.server.driver import serve_stream
from mrtr_transports.server.fdstream import FdStream
from mrtr_transports.server.http import HttpServer
from mrtr_transports.server.ws import WsServer
from support import srv_apps

import mrtr_core as m

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}
CITY = m.wire.ElicitResult(action="accept", content={"city": "Oslo"})
TONE = m.wire.CreateMessageResult(
    role="assistant", content={"type": "text", "text": "cold but bright"}, model="test-llm"
)
ANSWERS: dict[str, Any] = {"city": CITY, "tone": TONE}


def server_env() -> dict[str, str]:
    paths = [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


class Peer:
    """A client connection over a server's input and output streams."""

    def __init__(
        self,
        conn: m.Connection,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream,
    ) -> None:
        self.conn = conn
        self.send_stream = send_stream
        self.receive_stream = receive_stream
        self.stdout = bytearray()  # every byte the server wrote to its stdout
        self.stderr = bytearray()
        self.other: list[Any] = []  # events seen while waiting for something else

    async def write(self, data: bytes) -> None:
        if data:
            await self.send_stream.send_all(data)

    async def event(self) -> Any:
        """The next event; handshake steps and the server's pings are answered here."""
        while True:
            event = self.conn.next_event(trio.current_time())
            if event is m.NEED_DATA:
                data = await self.receive_stream.receive_some(65536)
                self.stdout += data
                self.conn.receive_data(data)
            elif isinstance(event, (m.HandshakeStep, m.AutoReply)):
                await self.write(self.conn.send(event))
            else:
                return event

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> m.ResultResponse | m.ErrorResponse:
        rid = self.conn.new_request_id()
        await self.write(self.conn.send(m.Request(id=rid, method=method, params=params)))
        return await self.response(rid)

    async def response(self, rid: m.RequestId) -> m.ResultResponse | m.ErrorResponse:
        while True:
            event = await self.event()
            if isinstance(event, (m.ResultResponse, m.ErrorResponse)) and event.id == rid:
                return event
            self.other.append(event)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answers: Mapping[str, Any] | None = None,
        legacy_answers: Mapping[str, Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> tuple[Any, list[Any]]:
        """Run a tools/call flow to its end: (the terminal engine event, all else seen)."""
        params = {"name": name, "arguments": dict(arguments or {})}
        handle = self.conn.call("tools/call", params, now=trio.current_time(), **options)
        seen: list[Any] = []
        while True:
            event = await self.event()
            seen.append(event)
            if isinstance(event, m.Request) and legacy_answers is not None:
                # A 2025-era server asks with a real request: answer it.
                result = legacy_answers[event.method]
                await self.write(self.conn.send(m.ResultResponse(id=event.id, result=result)))
                continue
            if not (isinstance(event, m.CallEvent) and event.call == handle):
                continue
            step = event.event
            if isinstance(step, m.engine.SendRetry):
                await trio.sleep(step.delay)
            if isinstance(step, (m.engine.SendRequest, m.engine.SendRetry, m.engine.CancelLeg)):
                await self.write(self.conn.send(event))
            elif isinstance(step, m.engine.DispatchInput):
                assert answers is not None, step
                self.conn.provide(handle, step.key, answers[step.key], trio.current_time())
            elif isinstance(
                step, (m.engine.Done, m.engine.Failed, m.engine.Cancelled, m.engine.TimedOut)
            ):
                return step, seen

    async def stats(self) -> dict[str, int]:
        reply = await self.request("tools/call", {"name": "stats", "arguments": {}})
        assert isinstance(reply, m.ResultResponse), reply
        counts: dict[str, int] = reply.result["structuredContent"]
        return counts

    def stdout_messages(self) -> list[dict[str, Any]]:
        """Every stdout line as JSON: any stray output would fail here."""
        lines = bytes(self.stdout).split(b"\n")
        assert lines[-1] == b"", "stdout ends in the middle of a line"
        messages = [json.loads(line) for line in lines[:-1]]
        assert all(msg.get("jsonrpc") == "2.0" for msg in messages)
        return messages


class ProcessPeer(Peer):
    """A peer over the pipes of a server process."""

    def __init__(self, conn: m.Connection, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        super().__init__(conn, process.stdin, process.stdout)
        self.process = process

    async def collect_stderr(self) -> None:
        assert self.process.stderr is not None
        while data := await self.process.stderr.receive_some(65536):
            self.stderr += data


def client_connection(era: str, capabilities: Mapping[str, Any], **options: Any) -> m.Connection:
    return m.Connection(
        m.CLIENT,
        era=era,  # type: ignore[arg-type]
        capabilities=capabilities,
        info={"name": "stdio-test", "version": "1.0"},
        **options,
    )


@asynccontextmanager
async def open_server(
    *,
    era: str = "modern",
    capabilities: Mapping[str, Any] = CAPS,
    app: str = "support.srv_apps:TestApp",
    **conn_options: Any,
) -> AsyncIterator[ProcessPeer]:
    argv = [sys.executable, "-m", "mrtr_transports", "serve", "--stdio"]
    argv += ["--app", app, "--drain-timeout", "0.6"]
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=server_env(),
    )
    peer = ProcessPeer(client_connection(era, capabilities, **conn_options), process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.collect_stderr)
            yield peer
            # Shutdown as the spec says: close stdin, then the server exits by itself.
            await peer.send_stream.aclose()
            with trio.fail_after(3):
                assert await process.wait() == 0, peer.stderr.decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_discover_then_a_two_round_flow() -> None:
    with trio.fail_after(5):
        async with open_server() as peer:
            discover = await peer.request("server/discover")
            assert isinstance(discover, m.ResultResponse)
            assert discover.result["supportedVersions"] == ["2026-07-28"]
            assert discover.result["instructions"] == srv_apps.TestApp.instructions
            assert discover.result["_meta"][m.wire.META_SERVER_INFO]["name"] == "srv-test"

            end, seen = await peer.call("trip", answers=ANSWERS)
            assert end == m.engine.Done(result=end.result)
            assert end.result["content"][0]["text"] == "Trip to Oslo: cold but bright"
            legs = [e.event for e in seen if isinstance(e, m.CallEvent)]
            assert [
                type(leg).__name__ for leg in legs if not isinstance(leg, m.engine.RoundStarted)
            ] == [
                "SendRequest",
                "DispatchInput",
                "SendRetry",
                "DispatchInput",
                "SendRetry",
                "Done",
            ]
        requests = [msg for msg in peer.stdout_messages() if "result" in msg]
        # The city rode in the sealed requestState of the second round, never in clear.
        second = requests[2]["result"]
        assert second["resultType"] == "input_required" and "tone" in second["inputRequests"]
        assert second["requestState"].startswith("mrtr1.k1.")


async def test_requests_run_concurrently() -> None:
    with trio.fail_after(5):
        async with open_server() as peer:
            slow = peer.conn.new_request_id()
            call = {"name": "slow", "arguments": {"seconds": 0.15}}
            await peer.write(peer.conn.send(m.Request(id=slow, method="tools/call", params=call)))
            echo = await peer.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            assert isinstance(echo, m.ResultResponse)
            assert echo.result["content"][0]["text"] == "hi"
            assert peer.other == []  # the echo overtook the slow call
            done = await peer.response(slow)
            assert isinstance(done, m.ResultResponse)
            assert done.result["content"][0]["text"] == "slow done"


async def test_answers_bigger_than_the_pipe_arrive_whole_among_small_ones() -> None:
    # An answer goes straight to the pipe while nothing waits; what the pipe does not
    # take (here: most of 400 KB, with nobody reading for a while) waits for the writer
    # task, and every answer after it waits behind it: whole lines, each exactly once.
    big = "x" * 400_000
    with trio.fail_after(20):
        async with open_server() as peer:
            ids = []
            for n in range(30):
                rid = peer.conn.new_request_id()
                ids.append(rid)
                text = big if n % 10 == 0 else f"small {n}"
                call = {"name": "echo", "arguments": {"text": text}}
                await peer.write(
                    peer.conn.send(m.Request(id=rid, method="tools/call", params=call))
                )
            await trio.sleep(0.3)  # the server fills the pipe and queues the rest
            replies: dict[Any, Any] = {}
            while len(replies) < len(ids):  # (concurrent requests: in any order)
                event = await peer.event()
                assert isinstance(event, m.ResultResponse), event
                replies[event.id] = event.result["content"][0]["text"]
            assert replies == {
                rid: big if n % 10 == 0 else f"small {n}" for n, rid in enumerate(ids)
            }
            answered = [msg["id"] for msg in peer.stdout_messages()]
            assert sorted(answered) == sorted(ids)


async def test_handler_output_goes_to_stderr_never_stdout() -> None:
    with trio.fail_after(5):
        async with open_server() as peer:
            end, _ = await peer.call("noisy")
            assert end.result["content"][0]["text"] == "made some noise"
            echo = await peer.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
            assert isinstance(echo, m.ResultResponse)
        assert len(peer.stdout_messages()) == 2  # the two answers and nothing else
        stderr = peer.stderr.decode()
        for noise in ("print() from", "sys.stdout.write from", "os.write(1) from"):
            assert noise in stderr


async def test_progress_and_log_lines_reach_the_client() -> None:
    with trio.fail_after(5):
        async with open_server(log_level="info") as peer:
            end, seen = await peer.call("progress", progress=True)
            assert end.result["content"][0]["text"] == "progressed"
        progress = [e for e in seen if isinstance(e, m.Progress)]
        assert [(p.progress, p.total, p.message) for p in progress] == [
            (1, 3, "step 1"),
            (2, 3, "step 2"),
            (3, 3, "step 3"),
        ]
        logs = [e for e in seen if isinstance(e, m.Notification)]
        assert [n.params for n in logs] == [  # the debug line is below the request's level
            {"level": "info", "data": {"note": "halfway"}, "logger": "srv"}
        ]


async def test_cancelled_request_is_stopped_and_never_answered() -> None:
    with trio.fail_after(5):
        async with open_server() as peer:
            handle = peer.conn.call("tools/call", {"name": "sleep"}, now=trio.current_time())
            send = await peer.event()
            assert isinstance(send.event, m.engine.SendRequest)
            leg = peer.conn.send(send)
            leg_id = json.loads(leg)["id"]
            await peer.write(leg)
            while (await peer.stats())["started"] < 1:
                await trio.sleep(0.01)
            peer.conn.cancel(handle)
            cancel = await peer.event()
            assert isinstance(cancel.event, m.engine.CancelLeg)
            await peer.write(peer.conn.send(cancel))  # notifications/cancelled
            assert (await peer.event()).event == m.engine.Cancelled()
            while (await peer.stats())["cancelled"] < 1:  # the handler was really stopped
                await trio.sleep(0.01)
        answered = [msg["id"] for msg in peer.stdout_messages()]
        assert len(answered) >= 2 and leg_id not in answered  # stats answered, the leg never


async def test_end_of_stdin_ends_the_server_even_with_a_handler_running() -> None:
    with trio.fail_after(5):
        async with open_server() as peer:
            for name, arguments in (("sleep", {}), ("slow", {"seconds": 0.01})):
                call = {"name": name, "arguments": arguments}
                rid = peer.conn.new_request_id()
                await peer.write(
                    peer.conn.send(m.Request(id=rid, method="tools/call", params=call))
                )
            assert peer.process.stdin is not None
            await peer.process.stdin.aclose()
            # The slow request is answered within the drain time; the sleeper is cancelled.
            done = await peer.response(rid)
            assert isinstance(done, m.ResultResponse)
            assert await peer.process.wait() == 0
        assert len(peer.stdout_messages()) == 1


async def test_end_of_stdin_ends_a_listen_stream_with_its_result() -> None:
    with trio.fail_after(5):
        async with open_server(app="mrtr_transports.apps.example:app") as peer:
            rid = peer.conn.new_request_id()
            listen = {"notifications": {"toolsListChanged": True}}
            request = m.Request(id=rid, method="subscriptions/listen", params=listen)
            await peer.write(peer.conn.send(request))
            ack = await peer.event()
            assert isinstance(ack, m.Notification), ack
            assert ack.method == "notifications/subscriptions/acknowledged"
            assert peer.process.stdin is not None
            await peer.process.stdin.aclose()
            # Not cancelled after the drain time: the app ends the stream with its result.
            end = await peer.event()
            assert isinstance(end, m.ResultResponse) and end.id == rid, end
            assert end.result["_meta"][SUBSCRIPTION_ID] == rid
            assert await peer.process.wait() == 0
        assert [msg.get("id") for msg in peer.stdout_messages()] == [None, rid]


async def test_malformed_lines_are_answered_and_the_next_line_served() -> None:
    with trio.fail_after(5):
        async with open_server() as peer:
            bad_params = {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": [1]}
            await peer.write(b"this is not JSON\n" + json.dumps(bad_params).encode() + b"\n")
            echo = await peer.request("tools/call", {"name": "echo", "arguments": {"text": "ok"}})
            assert isinstance(echo, m.ResultResponse)
            assert echo.result["content"][0]["text"] == "ok"
        errors = [msg for msg in peer.stdout_messages() if "error" in msg]
        assert errors[0]["error"]["code"] == m.ErrorCode.PARSE_ERROR and "id" not in errors[0]
        assert errors[1]["error"]["code"] == m.ErrorCode.INVALID_PARAMS and errors[1]["id"] == "x"


async def test_app_errors_become_json_rpc_errors() -> None:
    with trio.fail_after(5):
        async with open_server(capabilities={}) as peer:
            crash = await peer.request("tools/call", {"name": "crash", "arguments": {}})
            assert isinstance(crash, m.ErrorResponse)
            assert (
                crash.error.code == m.ErrorCode.INTERNAL_ERROR
                and "secret" not in crash.error.message
            )
            unknown = await peer.request("nope/nothing", {})
            assert isinstance(unknown, m.ErrorResponse)
            assert unknown.error.code == m.ErrorCode.METHOD_NOT_FOUND
            # This request declared no sampling: the tool may not ask for it.
            asks = await peer.request("tools/call", {"name": "ask_sampling", "arguments": {}})
            assert isinstance(asks, m.ErrorResponse)
            assert asks.error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
            assert asks.error.data == {"requiredCapabilities": {"sampling": {}}}
        assert "secret detail" in peer.stderr.decode()  # the traceback is in the log


async def test_legacy_client_is_asked_with_real_requests() -> None:
    with trio.fail_after(5):
        async with open_server(era="legacy") as peer:
            opened = await peer.event()
            assert isinstance(opened, m.SessionOpened) and opened.era == "legacy"
            legacy_answers = {
                "elicitation/create": {"action": "accept", "content": {"city": "Bergen"}},
                "sampling/createMessage": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "wet and lovely"},
                    "model": "test-llm",
                },
                "roots/list": {"roots": [{"uri": "file:///srv/data"}]},
            }
            end, seen = await peer.call("trip", legacy_answers=legacy_answers)
            assert end.result["content"][0]["text"] == "Trip to Bergen: wet and lovely"
            asked = [e.method for e in seen if isinstance(e, m.Request)]
            assert asked == ["elicitation/create", "sampling/createMessage"]
            end, _ = await peer.call("roots", legacy_answers=legacy_answers)
            assert end.result["content"][0]["text"] == "file:///srv/data"
            end, _ = await peer.call("pause", legacy_answers=legacy_answers)  # state only
            assert end.result["content"][0]["text"] == "resumed after a state-only round"
        # A 2025-era result never carries resultType: the shim hid the rounds.
        assert all("resultType" not in msg.get("result", {}) for msg in peer.stdout_messages())


async def test_legacy_request_cancelled_while_the_client_is_asked() -> None:
    with trio.fail_after(5):
        async with open_server(era="legacy") as peer:
            assert isinstance(await peer.event(), m.SessionOpened)
            rid = peer.conn.new_request_id()
            call = {"name": "trip", "arguments": {}}
            await peer.write(peer.conn.send(m.Request(id=rid, method="tools/call", params=call)))
            question = await peer.event()
            assert isinstance(question, m.Request) and question.method == "elicitation/create"
            note = {"requestId": rid, "reason": "changed my mind"}
            await peer.write(
                peer.conn.send(m.Notification(method="notifications/cancelled", params=note))
            )
            withdrawn = await peer.event()  # the server withdraws its open question
            assert withdrawn == m.RequestCancelled(request_id=question.id)
            echo = await peer.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
            assert isinstance(echo, m.ResultResponse)
        assert rid not in {msg.get("id") for msg in peer.stdout_messages()}


async def test_server_stops_when_nobody_reads_its_output() -> None:
    with trio.fail_after(5):
        async with open_server() as peer:
            await peer.receive_stream.aclose()
            call = {"name": "echo", "arguments": {"text": "into the void"}}
            await peer.write(peer.conn.send(m.Request(id=1, method="tools/call", params=call)))
            assert await peer.process.wait() == 0  # stdin is still open: it stopped by itself


def pipe() -> tuple[trio.lowlevel.FdStream, FdStream]:
    """A pipe to the driver in this process: our (trio) end, the server's end."""
    read_end, write_end = os.pipe()
    return trio.lowlevel.FdStream(write_end), FdStream(read_end)


def pipe_back() -> tuple[FdStream, trio.lowlevel.FdStream]:
    read_end, write_end = os.pipe()
    return FdStream(write_end), trio.lowlevel.FdStream(read_end)


async def test_a_legacy_question_nobody_answers_times_out() -> None:
    """The shared driver in-process, over pipes, with ``legacy_answer_timeout``."""
    with trio.fail_after(5):
        to_server, server_input = pipe()
        server_output, from_server = pipe_back()
        peer = Peer(client_connection("legacy", CAPS), to_server, from_server)
        serve = functools.partial(serve_stream, legacy_answer_timeout=0.1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, srv_apps.TestApp(), server_input, server_output)
            assert isinstance(await peer.event(), m.SessionOpened)
            call = {"name": "trip", "arguments": {}}
            await peer.write(peer.conn.send(m.Request(id=9, method="tools/call", params=call)))
            question = await peer.event()
            assert isinstance(question, m.Request) and question.method == "elicitation/create"
            # ... and nobody answers it.
            assert await peer.event() == m.RequestCancelled(request_id=question.id)
            failed = await peer.response(9)
            assert (
                isinstance(failed, m.ErrorResponse)
                and failed.error.code == m.ErrorCode.INTERNAL_ERROR
            )
            assert "did not answer in time" in failed.error.message
            await to_server.aclose()  # end of input: serve_stream returns
        for end in (server_input, server_output, from_server):
            await end.aclose()


def test_the_legacy_answer_timeout_is_on_by_default() -> None:
    # A question nobody answers must not hold a 2025 request for ever, unless asked to.
    # The same default on every transport that serves 2025 clients.
    for serving in (serve_stream, WsServer, HttpServer):
        default = inspect.signature(serving).parameters["legacy_answer_timeout"].default
        assert default == driver.DEFAULT_LEGACY_ANSWER_TIMEOUT == 300.0, serving


async def test_bad_app_spec_exits_with_a_clear_message() -> None:
    with trio.fail_after(5):
        argv = [
            sys.executable,
            "-m",
            "mrtr_transports",
            "serve",
            "--stdio",
            "--app",
            "support.srv_apps:Nope",
        ]
        done = await trio.run_process(
            argv, cwd=ROOT, env=server_env(), capture_stdout=True, capture_stderr=True, check=False
        )
        assert done.returncode == 2 and done.stdout == b""
        assert b"has no attribute 'Nope'" in done.stderr


def test_load_app_names_what_is_wrong() -> None:
    assert isinstance(
        load_app("support.srv_apps:TestApp"), srv_apps.TestApp
    )  # a class is instantiated
    app = srv_apps.TestApp()
    srv_apps.INSTANCE = app  # type: ignore[attr-defined]
    try:
        assert load_app("support.srv_apps:INSTANCE") is app
    finally:
        del srv_apps.INSTANCE  # type: ignore[attr-defined]
    for spec, words in [
        ("support.srv_apps", "expected MODULE:ATTR"),
        ("no_such_module_here:app", "cannot import module 'no_such_module_here'"),
        ("support.srv_apps:missing", "has no attribute 'missing'"),
        ("support.srv_apps:TOOLS", "is a list, not a ServerApp"),
    ]:
        with pytest.raises(AppSpecError, match=words):
            load_app(spec)


SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("SEEN", default="nothing")


class ContextApp:
    """Each call records its tool name in a context variable; ``wait`` sleeps first."""

    info: Mapping[str, Any] = {"name": "ctx", "version": "1"}
    capabilities: Mapping[str, Any] = {"tools": {}}
    instructions = None

    def __init__(self) -> None:
        self.tasks: dict[str, Any] = {}

    async def handle(self, request: m.Request, info: Any, outlet: Any) -> Mapping[str, Any]:
        assert request.params is not None
        name = request.params["name"]
        seen = SEEN.get()
        SEEN.set(name)
        self.tasks[name] = trio.lowlevel.current_task()
        if name.startswith("wait"):
            await trio.sleep(0.2)
        return {"content": [{"type": "text", "text": f"{name} saw {seen}, then {SEEN.get()}"}]}


async def test_requests_run_at_once_or_in_a_task_of_their_own_each_in_its_own_context() -> None:
    # A leg that never waits runs in the task that read it; one that waits keeps that
    # task while a new one reads on.  Either way the request has its own context (as a
    # task of its own has): what one sets is not seen by the next.
    app = ContextApp()
    with trio.fail_after(5):
        to_server, server_input = pipe()
        server_output, from_server = pipe_back()
        peer = Peer(client_connection("modern", CAPS), to_server, from_server)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_stream, app, server_input, server_output)
            first = await peer.request("tools/call", {"name": "quick1", "arguments": {}})
            assert isinstance(first, m.ResultResponse)
            assert first.result["content"][0]["text"] == "quick1 saw nothing, then quick1"
            waiting = peer.conn.new_request_id()
            call = {"name": "wait", "arguments": {}}
            await peer.write(
                peer.conn.send(m.Request(id=waiting, method="tools/call", params=call))
            )
            # While `wait` sleeps, reading goes on (in another task) and answers others.
            second = await peer.request("tools/call", {"name": "quick2", "arguments": {}})
            assert isinstance(second, m.ResultResponse)
            assert second.result["content"][0]["text"] == "quick2 saw nothing, then quick2"
            assert peer.other == []  # quick2 overtook wait
            slow = await peer.response(waiting)
            assert isinstance(slow, m.ResultResponse)
            assert slow.result["content"][0]["text"] == "wait saw nothing, then wait"
            third = await peer.request("tools/call", {"name": "quick3", "arguments": {}})
            assert isinstance(third, m.ResultResponse)
            assert third.result["content"][0]["text"] == "quick3 saw nothing, then quick3"
            await to_server.aclose()  # end of input: serve_stream returns
        for end in (server_input, server_output, from_server):
            await end.aclose()
    # quick1 ran in the reading task, which then carried `wait`; quick2 and quick3 ran
    # in the task that took over reading.
    assert app.tasks["quick1"] is app.tasks["wait"]
    assert app.tasks["quick2"] is app.tasks["quick3"] is not app.tasks["wait"]
