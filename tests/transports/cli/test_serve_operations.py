"""Operating ``mrtr serve``: stopping with a drain, the health check, the access log, the
tool's traceback on stderr, shared sealing keys with ``mrtr state inspect``, the options.

Every test runs ``mrtr serve`` as a real subprocess (``python -m mrtr_transports.cli.main``)
on 127.0.0.1, with the app named by its file path (``tests/support/ops_app.py:app``), and
talks to it with a real client: ``mrtr call`` (a subprocess too) or raw HTTP on a socket.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
from mrtr_transports.stores.keys import new_state_keys
from support.cli_run import MRTR, Ran, mrtr
from support.ops_app import BOOM_DETAIL, SLOW_STARTED
from support.raw_http import RawHttp, tool_call

import mrtr_core as m

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[3]
OPS_APP = f"{ROOT / 'tests' / 'support' / 'ops_app.py'}:app"
LISTENING = re.compile(r"listening on ((?:http|ws)://127\.0\.0\.1:(\d+)(/\S*))")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Served:
    """One ``mrtr serve`` subprocess; its stderr is read all along (a full pipe would stall it)."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.stderr = b""
        self._grew = trio.Event()
        self.url = ""
        self.port = 0

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.receive_some():
            self.stderr += chunk
            self._grew.set()
            self._grew = trio.Event()
        self._grew.set()

    async def wait_for(self, text: str) -> None:
        """Until ``text`` is on the server's stderr (it fails if the server ends first)."""
        while text.encode() not in self.stderr:
            assert self.process.returncode is None or self._grew.is_set(), self.said
            if self.process.poll() is not None and text.encode() not in self.stderr:
                await trio.sleep(0.05)  # what it wrote last may still be in the pipe
                assert text.encode() in self.stderr, self.said
            with trio.move_on_after(0.2):
                await self._grew.wait()

    @property
    def said(self) -> str:
        return self.stderr.decode(errors="replace")

    async def ended(self) -> int:
        """The exit code, once the server has ended and its stderr is all read."""
        code = await self.process.wait()
        while not self._grew.is_set():  # (read_stderr sets it for good at the end)
            await trio.sleep(0.01)
        return code


@asynccontextmanager
async def serve(*args: str, cwd: Path = ROOT) -> AsyncIterator[Served]:
    """``mrtr serve ARGS`` running until the block ends (then killed if still up)."""
    process = await trio.lowlevel.open_process(
        [*MRTR, "serve", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )
    served = Served(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(served.read_stderr)
            if "--stdio" not in args:
                await served.wait_for("listening on")
                found = LISTENING.search(served.said)
                assert found, served.said
                served.url, served.port = found.group(1), int(found.group(2))
            yield served
            if process.returncode is None:
                process.kill()
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def raw_request(
    port: int, method: str, target: str, headers: Sequence[tuple[str, str]] = (), body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request on its own connection: ``(status, headers, body)``."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        client = h11.Connection(h11.CLIENT)
        names = {name.lower() for name, _ in headers}
        given = [*headers] if "host" in names else [("Host", f"127.0.0.1:{port}"), *headers]
        if body:
            given.append(("Content-Length", str(len(body))))
        data = client.send(h11.Request(method=method, target=target, headers=given)) or b""
        data += client.send(h11.Data(data=body)) or b"" if body else b""
        data += client.send(h11.EndOfMessage()) or b""
        await stream.send_all(data)
        status, response_headers, response_body = 0, {}, b""
        while True:
            event = client.next_event()
            if event is h11.NEED_DATA:
                client.receive_data(await stream.receive_some())
            elif isinstance(event, h11.Response):
                status = event.status_code
                response_headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                response_body += event.data
            else:  # EndOfMessage, or the server closed
                return status, response_headers, response_body


def call(url: str, tool: str, arguments: dict[str, Any] | None = None) -> list[str]:
    return ["call", url, tool, json.dumps(arguments or {})]


# --- Stopping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signum", "exit_code", "said"),
    [(signal.SIGTERM, 0, "terminated"), (signal.SIGINT, 130, "interrupted")],
    ids=["sigterm", "ctrl-c"],
)
async def test_a_call_in_flight_when_the_signal_comes_completes_for_its_client(
    signum: signal.Signals, exit_code: int, said: str
) -> None:
    with trio.fail_after(60):
        async with serve("--http", "127.0.0.1:0", "--app", OPS_APP) as served:
            ran: list[Ran] = []

            async def client() -> None:
                ran.append(await mrtr(*call(served.url, "slow", {"seconds": 1.5}), timeout=40))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(client)
                await served.wait_for(SLOW_STARTED)
                served.process.send_signal(signum)
                # While it drains: a newcomer is told to go elsewhere, the health check too.
                await trio.sleep(0.2)
                status, headers, body = await raw_request(served.port, "GET", "/healthz")
                assert status == 503 and headers["connection"] == "close", (status, headers)
                assert headers["retry-after"] == "1"
                status, headers, body = await raw_request(
                    served.port, "POST", "/mcp", body=json.dumps(tool_call("slow")).encode()
                )
                assert status == 503 and headers["connection"] == "close"
                assert json.loads(body)["error"]["message"].startswith("the server is shutting")
            assert await served.ended() == exit_code, served.said
    assert ran[0].returncode == 0, ran[0].stderr
    assert json.loads(ran[0].stdout)["content"] == [{"type": "text", "text": "slow done"}]
    lines = served.said.splitlines()
    assert lines[-1] == f"mrtr serve: {said}" and "Traceback" not in served.said, lines


async def test_what_outlives_the_drain_timeout_is_cut_and_the_server_still_exits_0() -> None:
    with trio.fail_after(60):
        async with serve(
            "--http", "127.0.0.1:0", "--app", OPS_APP, "--drain-timeout", "0.3"
        ) as served:
            ran: list[Ran] = []

            async def client() -> None:
                ran.append(await mrtr(*call(served.url, "slow", {"seconds": 600}), timeout=40))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(client)
                await served.wait_for(SLOW_STARTED)
                served.process.send_signal(signal.SIGTERM)
                assert await served.ended() == 0, served.said  # not after 600 s
    assert ran[0].returncode != 0  # its connection was closed without an answer
    assert served.said.splitlines()[-1] == "mrtr serve: terminated"


async def test_a_second_ctrl_c_cuts_the_drain_short() -> None:
    with trio.fail_after(60):
        async with (
            serve("--http", "127.0.0.1:0", "--app", OPS_APP, "--drain-timeout", "600") as served,
            trio.open_nursery() as nursery,
        ):
            slow_call = call(served.url, "slow", {"seconds": 600})
            nursery.start_soon(functools.partial(mrtr, *slow_call, timeout=40))
            await served.wait_for(SLOW_STARTED)
            served.process.send_signal(signal.SIGINT)
            await trio.sleep(0.3)
            assert served.process.poll() is None  # draining: up to 600 s
            served.process.send_signal(signal.SIGINT)
            assert await served.ended() == 130, served.said
            nursery.cancel_scope.cancel()
    lines = served.said.splitlines()
    assert lines[-1] == "mrtr serve: interrupted" and "Traceback" not in served.said


async def test_stdio_answers_the_request_in_flight_after_sigterm_then_exits_0() -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 0.5}, "_meta": META},
    }
    with trio.fail_after(60):
        async with serve("--stdio", "--app", OPS_APP, "--drain-timeout", "20") as served:
            assert served.process.stdin is not None and served.process.stdout is not None
            await served.process.stdin.send_all(json.dumps(request).encode() + b"\n")
            await served.wait_for(SLOW_STARTED)
            served.process.send_signal(signal.SIGTERM)  # stdin stays open: the signal stops it
            answer = b""
            while chunk := await served.process.stdout.receive_some():
                answer += chunk
            assert await served.ended() == 0, served.said
    response = json.loads(answer)
    assert response["id"] == 7
    assert response["result"]["content"] == [{"type": "text", "text": "slow done"}]
    assert served.said.splitlines()[-1] == "mrtr serve: terminated"


async def test_a_websocket_call_in_flight_completes_then_the_socket_closes_1001() -> None:
    with trio.fail_after(60):
        async with serve("--ws", "127.0.0.1:0", "--app", OPS_APP) as served:
            ran: list[Ran] = []

            async def client() -> None:
                ran.append(await mrtr(*call(served.url, "slow", {"seconds": 1.0}), timeout=40))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(client)
                await served.wait_for(SLOW_STARTED)
                served.process.send_signal(signal.SIGTERM)
                await trio.sleep(0.2)
                status, headers, _ = await raw_request(served.port, "GET", "/mcp")
                assert status == 503 and headers["connection"] == "close"
            assert await served.ended() == 0, served.said
    assert ran[0].returncode == 0, ran[0].stderr
    assert json.loads(ran[0].stdout)["content"] == [{"type": "text", "text": "slow done"}]
    assert served.said.splitlines()[-1] == "mrtr serve: terminated"


# --- Health ----------------------------------------------------------------------------------


async def test_the_health_check_answers_any_host_and_origin_with_a_tiny_body() -> None:
    with trio.fail_after(30):
        async with serve("--http", "127.0.0.1:0", "--app", OPS_APP) as served:
            port = served.port
            # A balancer dials the pod's address, sends no Accept, maybe an Origin: all fine.
            probe = [("Host", f"10.1.2.3:{port}"), ("Origin", "https://elsewhere.example")]
            status, headers, body = await raw_request(port, "GET", "/healthz?probe=1", probe)
            assert (status, body) == (200, b'{"status":"ok"}')
            assert headers["content-type"] == "application/json"
            assert headers["cache-control"] == "no-store"
            status, _, body = await raw_request(port, "HEAD", "/healthz", probe)
            assert (status, body) == (200, b"")
            status, headers, _ = await raw_request(port, "POST", "/healthz", body=b"{}")
            assert status == 405 and headers["allow"] == "GET, HEAD"
            # The endpoint keeps its rules: the same Host is refused there.
            status, _, _ = await raw_request(port, "POST", "/mcp", probe, b"{}")
            assert status == 403
        async with serve(
            "--http", "127.0.0.1:0", "--app", OPS_APP, "--health-path", "/ready"
        ) as moved:
            assert (await raw_request(moved.port, "GET", "/ready"))[0] == 200
            assert (await raw_request(moved.port, "GET", "/healthz"))[0] == 404
        async with serve("--http", "127.0.0.1:0", "--app", OPS_APP, "--health-path", "off") as off:
            assert (await raw_request(off.port, "GET", "/healthz"))[0] == 404


# --- Logging ---------------------------------------------------------------------------------


async def test_at_info_each_request_leaves_an_access_line_and_a_raising_tool_its_traceback() -> (
    None
):
    with trio.fail_after(60):
        async with serve(
            "--http", "127.0.0.1:0", "--app", OPS_APP, "--log-level", "info"
        ) as served:
            failed = await mrtr(*call(served.url, "boom"), timeout=30)
            done = await mrtr(*call(served.url, "slow", {"seconds": 0}), timeout=30)
            await raw_request(served.port, "GET", "/healthz")
            await served.wait_for('"GET /healthz" 200')
            served.process.send_signal(signal.SIGTERM)
            assert await served.ended() == 0
    # The client gets a clean tool error: the message, never the traceback.
    assert failed.returncode == 1 and json.loads(failed.stdout)["isError"] is True
    assert "Traceback" not in failed.stdout + failed.stderr
    assert done.returncode == 0
    said = served.said
    assert "ERROR:mrtr.server:the tool 'boom' raised\nTraceback" in said
    assert f"RuntimeError: {BOOM_DETAIL}" in said
    access = [line for line in said.splitlines() if line.startswith("INFO:mrtr.server.access")]
    line = re.compile(r'127\.0\.0\.1 "(\w+) (\S+)" (\d+) [\d.]+ms (\d+)B(?: (\S+))?(?: (\S+))?$')
    seen = [line.search(entry) for entry in access]
    assert all(seen), access
    calls = [found.groups() for found in seen if found and found.group(5) == "tools/call"]
    assert [(c[0], c[1], c[2], c[5]) for c in calls] == [
        ("POST", "/mcp", "200", "boom"),
        ("POST", "/mcp", "200", "slow"),
    ]
    assert all(int(c[3]) > 0 for c in calls)
    assert any(found and found.groups()[:3] == ("GET", "/healthz", "200") for found in seen)


async def test_at_the_default_level_no_access_lines_but_tracebacks_still() -> None:
    with trio.fail_after(60):
        async with serve("--http", "127.0.0.1:0", "--app", OPS_APP) as served:
            await mrtr(*call(served.url, "boom"), timeout=30)
            await served.wait_for(BOOM_DETAIL)
            served.process.send_signal(signal.SIGTERM)
            assert await served.ended() == 0
        async with serve(
            "--http", "127.0.0.1:0", "--app", OPS_APP, "--log-level", "INFO", "--no-access-log"
        ) as quiet:
            await mrtr(*call(quiet.url, "slow", {"seconds": 0}), timeout=30)
            quiet.process.send_signal(signal.SIGTERM)
            assert await quiet.ended() == 0
    assert "Traceback" in served.said and "mrtr.server.access" not in served.said
    assert "mrtr.server.access" not in quiet.said


async def test_stdio_and_websocket_log_one_line_per_json_rpc_request() -> None:
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "boom", "arguments": {}, "_meta": META},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "no/such", "params": {"_meta": META}},
    ]
    stdin = b"".join(json.dumps(r).encode() + b"\n" for r in requests)
    with trio.fail_after(30):
        done = await trio.run_process(
            [*MRTR, "serve", "--stdio", "--app", OPS_APP, "--log-level", "INFO"],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
        )
    said = done.stderr.decode()
    assert done.returncode == 0, said
    access = [line for line in said.splitlines() if "mrtr.server.access" in line]
    assert any(re.search(r"stdio id=1 server/discover ok [\d.]+ms$", a) for a in access), access
    assert any(re.search(r"stdio id=2 tools/call boom ok [\d.]+ms$", a) for a in access), access
    assert any(re.search(r"stdio id=3 no/such error -32601 [\d.]+ms$", a) for a in access), access
    assert "the tool 'boom' raised" in said
    with trio.fail_after(60):
        async with serve("--ws", "127.0.0.1:0", "--app", OPS_APP, "--log-level", "INFO") as ws:
            assert (await mrtr(*call(ws.url, "slow", {"seconds": 0}), timeout=30)).returncode == 0
            await ws.wait_for("tools/call slow ok")
            ws.process.send_signal(signal.SIGTERM)
            assert await ws.ended() == 0
    assert re.search(r"ws 127\.0\.0\.1 id=\S+ tools/call slow ok [\d.]+ms", ws.said), ws.said


# --- Sealing keys shared with mrtr state inspect ---------------------------------------------


async def first_leg_state(port: int) -> str:
    """The requestState of a real input_required answer (``ask_name``'s first leg)."""
    peer = await RawHttp.connect(port)
    try:
        reply = await peer.post(tool_call("ask_name"))
    finally:
        await peer.aclose()
    result = reply.final()["result"]
    assert result["resultType"] == "input_required", result
    state: str = result["requestState"]
    return state


async def test_state_inspect_opens_what_serve_sealed_given_the_same_keys_source(
    tmp_path: Path,
) -> None:
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(new_state_keys("k1"))
    keys = json.loads(keys_file.read_text())
    # Rotation: a second key signs now; k1 still opens what was sealed before.
    second = json.loads(new_state_keys("k2"))["keys"]
    rotated = {"signing_key": "k2", "keys": {**keys["keys"], **second}}
    env = {**os.environ, "MRTR_STATE_KEYS": json.dumps(rotated)}
    params = json.dumps({"name": "ask_name", "arguments": {}})
    with trio.fail_after(60):
        async with serve(
            "--http", "127.0.0.1:0", "--app", OPS_APP, "--state-keys", str(keys_file)
        ) as served:
            token = await first_leg_state(served.port)
    with trio.fail_after(60):
        from_file = await mrtr(
            "state", "inspect", "--state-keys", str(keys_file), "--method", "tools/call",
            "--params", params, token,
        )  # fmt: skip
        after_rotation = await mrtr(
            "state", "inspect", "--state-keys", "env:MRTR_STATE_KEYS", token, env=env
        )
        other = tmp_path / "other.json"
        other.write_text(new_state_keys("k9"))
        stranger = await mrtr("state", "inspect", "--state-keys", str(other), token)
        missing = await mrtr("state", "inspect", token)
        unset = await mrtr("state", "inspect", "--state-keys", "env:MRTR_NO_SUCH_KEYS", token)
    assert from_file.returncode == 0, from_file.stdout + from_file.stderr
    assert "key id: k1" in from_file.stdout and "verdict: valid" in from_file.stdout
    assert after_rotation.returncode == 0, after_rotation.stdout + after_rotation.stderr
    assert stranger.returncode == 1 and "verdict: unknown_key" in stranger.stdout
    assert missing.returncode == 2 and "--state-keys" in missing.stderr
    assert unset.returncode == 2 and "'MRTR_NO_SUCH_KEYS' is not set" in unset.stderr
    # The replicas of a rotation share the env document: the new key signs, both open it.
    with trio.fail_after(60):
        process_env = {"MRTR_STATE_KEYS": json.dumps(rotated)}
        async with serve_with_env(process_env, "--state-keys", "env:MRTR_STATE_KEYS") as served:
            rotated_token = await first_leg_state(served.port)
        again = await mrtr(
            "state", "inspect", "--state-keys", "env:MRTR_STATE_KEYS", rotated_token, env=env
        )
        before = await mrtr("state", "inspect", "--state-keys", str(keys_file), rotated_token)
    assert again.returncode == 0 and "key id: k2" in again.stdout, again.stdout
    assert before.returncode == 1 and "unknown_key" in before.stdout  # k2 is not in the old file


@asynccontextmanager
async def serve_with_env(env: dict[str, str], *args: str) -> AsyncIterator[Served]:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)  # (the subprocess inherits it; restored at once)
    try:
        manager = serve("--http", "127.0.0.1:0", "--app", OPS_APP, *args)
        served = await manager.__aenter__()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        yield served
    finally:
        await manager.__aexit__(None, None, None)


# --- Options ---------------------------------------------------------------------------------


async def test_path_moves_the_endpoint() -> None:
    with trio.fail_after(30):
        async with serve("--http", "127.0.0.1:0", "--app", OPS_APP, "--path", "/api/mcp") as s:
            assert s.url.endswith(f":{s.port}/api/mcp")
            done = await mrtr(*call(s.url, "slow", {"seconds": 0}), timeout=20)
            assert done.returncode == 0, done.stderr
            body = json.dumps(tool_call("slow")).encode()
            status, _, _ = await raw_request(s.port, "POST", "/mcp", body=body)
            assert status == 404


async def test_trusted_proxy_decides_whether_x_forwarded_host_is_believed() -> None:
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    body = json.dumps(discover).encode()
    headers = [("Accept", "application/json"), ("Content-Type", "application/json")]
    headers += m.http.request_headers(discover)

    async def status_with(port: int, forwarded_host: str) -> int:
        sent = [*headers, ("X-Forwarded-Host", forwarded_host)]
        return (await raw_request(port, "POST", "/mcp", sent, body))[0]

    with trio.fail_after(30):
        allow = ["--allow-host", "mcp.example.com"]
        async with serve("--http", "127.0.0.1:0", "--app", OPS_APP, *allow) as untrusted:
            # Not from a trusted proxy: the header is ignored, the real Host (127.0.0.1) holds.
            assert await status_with(untrusted.port, "evil.example") == 200
        trust = ["--trusted-proxy", "127.0.0.0/8"]
        async with serve("--http", "127.0.0.1:0", "--app", OPS_APP, *allow, *trust) as trusted:
            assert await status_with(trusted.port, "evil.example") == 403
            assert await status_with(trusted.port, "mcp.example.com") == 200


async def test_log_level_sets_what_reaches_stderr() -> None:
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    stdin = b"this is not json\n" + json.dumps(discover).encode() + b"\n"

    async def served_at(level: str) -> subprocess.CompletedProcess[bytes]:
        return await trio.run_process(
            [*MRTR, "serve", "--stdio", "--app", OPS_APP, "--log-level", level],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )

    with trio.fail_after(30):
        info, warning, error = [await served_at(level) for level in ("info", "WARNING", "error")]
    assert b"WARNING:mrtr.server:bad input" in info.stderr
    assert b"INFO:mrtr.server.access:stdio id=1 server/discover ok" in info.stderr
    assert b"bad input" in warning.stderr and b"INFO:" not in warning.stderr
    assert error.stderr == b"", error.stderr
    answers = [json.loads(line) for line in error.stdout.splitlines()]
    assert [a.get("id") for a in answers] == [None, 1]  # still answered: -32700, then discover
    assert answers[0]["error"]["code"] == -32700


# --- --app -----------------------------------------------------------------------------------

GREET = """\
from helper import GREETING
from mrtr_transports.apps.mcp_app import McpApp

app = McpApp("greet", "1.0")


@app.tool()
def hello(ctx):
    return GREETING
"""


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ("greet.py:app", "."),
        ("greet:app", "."),
        ("path/to/greet.py:app", ".."),
        (None, "/"),  # an absolute path, from anywhere
    ],
    ids=["file-here", "module-here", "relative-path", "absolute-path"],
)
async def test_app_is_a_file_path_or_a_module_of_the_current_folder(
    tmp_path: Path, spec: str | None, where: str
) -> None:
    folder = tmp_path / "work" / "path" / "to"
    folder.mkdir(parents=True)
    (folder / "greet.py").write_text(GREET)
    (folder / "helper.py").write_text('GREETING = "hi from a sibling module"\n')
    cwd = {".": folder, "..": tmp_path / "work", "/": tmp_path}[where]
    app = spec if spec is not None else f"{folder / 'greet.py'}:app"
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "hello", "arguments": {}, "_meta": META},
    }
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing but the cwd
    with trio.fail_after(30):
        done = await trio.run_process(
            [*MRTR, "serve", "--stdio", "--app", app],
            stdin=json.dumps(request).encode() + b"\n",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=cwd,
            env=env,
        )
    assert done.returncode == 0, done.stderr.decode()
    content = json.loads(done.stdout)["result"]["content"]
    assert content == [{"type": "text", "text": "hi from a sibling module"}]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("nowhere.py:app", "no such file 'nowhere.py'"),
        ("greet:app", "cannot import module 'greet'"),
        ("greet.py", "expected MODULE:ATTR or FILE.py:ATTR"),
        ("ops_app.py:nope", "has no attribute 'nope'"),
    ],
)
async def test_an_app_that_is_not_there_is_a_usage_error_that_says_what_to_fix(
    tmp_path: Path, spec: str, words: str
) -> None:
    (tmp_path / "ops_app.py").write_text((ROOT / "tests/support/ops_app.py").read_text())
    with trio.fail_after(30):
        done = await trio.run_process(
            [*MRTR, "serve", "--stdio", "--app", spec],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=tmp_path,
        )
    said = done.stderr.decode()
    assert done.returncode == 2 and said.startswith("mrtr serve: error: --app "), said
    assert words in said, said
