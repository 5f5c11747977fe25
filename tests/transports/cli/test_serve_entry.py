"""``mrtr serve`` (``mrtr_transports.cli.serve``), also run as ``python -m mrtr_transports
serve``: stdout guarded before the app is imported, one set of options, one way to fail,
and ``--loop`` choosing the event loop the whole command runs on.

Each stdio test starts a real server process with the app of
``tests/support/noisy_app.py``, which writes to stdout at import time and in its
tool; the protocol stream must hold nothing but JSON-RPC messages.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.cli import serve
from mrtr_transports.cli.serve_options import LOOPS
from mrtr_transports.client.http import open_http_client
from support.cli_run import MRTR, TESTS_ON_PATH

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: Every command that serves stdio, as the tests and the docs run it.
STDIO_COMMANDS = {
    "mrtr serve --stdio": ["-m", "mrtr_transports.cli.main", "serve", "--stdio"],
    "mrtr serve --stdio (python -m mrtr_transports)": ["-m", "mrtr_transports", "serve"],
}
#: Every serve command.
ALL_COMMANDS = {
    **STDIO_COMMANDS,
    "mrtr serve --http (python -m mrtr_transports)": [
        "-m",
        "mrtr_transports",
        "serve",
        "--http",
        "127.0.0.1:0",
    ],
}


def server_env() -> dict[str, str]:
    paths = [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


async def run(argv: list[str], stdin: bytes = b"") -> trio.Process:
    with trio.fail_after(20):
        return await trio.run_process(
            [sys.executable, *argv],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env=server_env(),
        )


@pytest.mark.parametrize("command", list(STDIO_COMMANDS))
async def test_what_the_app_prints_never_reaches_the_protocol_stream(command: str) -> None:
    # Regression: `mrtr serve --stdio --app mod:app` imported the app before guarding stdout,
    # so a print at import time went out as a line of the protocol.
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "shout", "arguments": {}, "_meta": META},
        },
    ]
    stdin = b"".join(json.dumps(r).encode() + b"\n" for r in requests)
    argv = [*STDIO_COMMANDS[command], "--app", "support.noisy_app:app"]
    done = await run(argv, stdin)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    messages = [json.loads(line) for line in done.stdout.decode().splitlines()]  # nothing else
    by_id = {message["id"]: message for message in messages}
    assert sorted(by_id) == [1, 2] and len(messages) == 2
    assert "2026-07-28" in by_id[1]["result"]["supportedVersions"]
    assert by_id[2]["result"]["content"] == [{"type": "text", "text": "quiet on the protocol"}]
    for said in ("print at import", "fd 1 at import", "print in a tool", "fd 1 in a tool"):
        assert f"noisy: {said}" in stderr


@pytest.mark.parametrize("command", list(ALL_COMMANDS))
async def test_an_app_that_cannot_be_loaded_exits_2_the_same_way_everywhere(command: str) -> None:
    missing = await run([*ALL_COMMANDS[command], "--app", "support.srv_apps:Nope"])
    failing = await run([*ALL_COMMANDS[command], "--app", "support.unimportable_app:app"])
    for done in (missing, failing):
        assert done.returncode == 2 and done.stdout == b"", done.stderr
        prog = "mrtr serve" if "mrtr serve" in command else command.split(" --")[0]
        assert done.stderr.decode().startswith(f"{prog}: error: --app ")
    assert b"has no attribute 'Nope'" in missing.stderr
    assert b"importing it failed" in failing.stderr
    assert b"the app's configuration is missing" in failing.stderr


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--stdio", "--allow-origin", "*"], "only apply to --http"),
        (["--path", "/other"], "only apply to --http"),
        (["--ws", "127.0.0.1:0", "--health-path", "/h"], "only apply to --http"),
        (["--http", "127.0.0.1:0", "--drain-timeout", "inf"], "--drain-timeout"),
        (["--http", "8000"], "expected HOST:PORT"),
        (["--http", "127.0.0.1:0", "--trusted-proxy", "10.0.0.0/33"], "--trusted-proxy"),
        (["--http", "127.0.0.1:70000"], "expected HOST:PORT"),
        (["--drain-timeout", "-1"], "--drain-timeout"),
        (["--stdio", "--log-level", "chatty"], "not a logging level"),
        (["--stdio", "--max-connections", "4"], "only apply to --http"),
        (["--http", "127.0.0.1:0", "--head-timeout", "0"], "--head-timeout"),
        (["--http", "127.0.0.1:0", "--max-listen-per-client", "-1"], "more"),
    ],
)
def test_options_that_do_not_fit_are_usage_errors_before_anything_runs(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve.main(argv) == 2
    said = capsys.readouterr()
    assert said.out == "" and said.err.startswith("mrtr serve: error: ") and words in said.err


@pytest.mark.parametrize(
    ("signum", "exit_code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 0, "terminated")],
    ids=["ctrl-c", "sigterm"],
)
@pytest.mark.parametrize("command", list(ALL_COMMANDS))
async def test_a_signal_stops_every_serve_command_with_one_line_and_no_traceback(
    command: str, signum: signal.Signals, exit_code: int, said: str
) -> None:
    # Regression: trio wraps KeyboardInterrupt in an exception group, which got past the
    # entry's `except KeyboardInterrupt`: exit 1 and a traceback.  SIGTERM killed it.
    process = await trio.lowlevel.open_process(
        [sys.executable, *ALL_COMMANDS[command]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=server_env(),
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    stderr = b""
    try:
        with trio.fail_after(20):
            if "--http" in command:  # ready once it says where it listens
                while b"listening on" not in stderr or not stderr.endswith(b"\n"):
                    chunk = await process.stderr.receive_some()
                    assert chunk, stderr
                    stderr += chunk
            else:  # ready once it has answered a request (stdin stays open)
                discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover"}
                discover["params"] = {"_meta": META}
                await process.stdin.send_all(json.dumps(discover).encode() + b"\n")
                answer = b""
                while not answer.endswith(b"\n"):
                    chunk = await process.stdout.receive_some()
                    assert chunk, answer
                    answer += chunk
                assert json.loads(answer)["id"] == 1
            process.send_signal(signum)
            while chunk := await process.stderr.receive_some():
                stderr += chunk
            assert await process.wait() == exit_code, stderr.decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    prog = "mrtr serve" if "mrtr serve" in command else command.split(" --")[0]
    lines = stderr.decode().splitlines()
    assert lines[-1] == f"{prog}: {said}" and "Traceback" not in stderr.decode(), lines
    assert len(lines) == (2 if "--http" in command else 1), lines  # (and the address)


async def test_the_http_bounds_on_the_command_line_reach_the_server() -> None:
    # --head-timeout 0.5: a head that never completes is answered 408 in about half a
    # second, not after the default 10 s (the bounds all travel the same table).
    argv = ["-m", "mrtr_transports", "serve", "--http", "127.0.0.1:0", "--head-timeout", "0.5"]
    process = await trio.lowlevel.open_process(
        [sys.executable, *argv], stderr=subprocess.PIPE, cwd=ROOT, env=server_env()
    )
    try:
        assert process.stderr is not None
        said = b""
        with trio.fail_after(20):
            while b"listening on" not in said or not said.endswith(b"\n"):
                said += await process.stderr.receive_some(4096)
        port = int(said.split(b"http://127.0.0.1:")[1].split(b"/")[0])
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no end
        started = trio.current_time()
        answer = b""
        with trio.fail_after(8):  # well under the default 10 s head deadline
            while b"\r\n\r\n" not in answer:
                chunk = await stream.receive_some(4096)
                assert chunk, answer
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert trio.current_time() - started < 8
        await stream.aclose()
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(20):
            await process.wait()


def test_before_serving_the_heap_is_frozen_and_young_collections_are_rarer() -> None:
    # In a fresh interpreter: the test process's own collector is left as it is.
    probe = (
        "import gc; from mrtr_transports.cli import serve; "
        "before = gc.get_freeze_count(); serve.settle_heap(); "
        "print(before, gc.get_freeze_count(), *gc.get_threshold())"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    before, frozen, first, second, third = map(int, out.stdout.split())
    assert before == 0 and frozen > 1000  # the imported modules' objects, out of reach
    assert first == serve.SERVING_GC_THRESHOLD and (second, third) == (10, 10)


# --- --loop: the event loop the whole command runs on -----------------------------------------


async def call_over_stdio(argv: list[str], tool: str) -> tuple[trio.Process, list[Any]]:
    """``argv`` serving ``support.which_loop_app`` over stdio, asked to call ``tool`` once."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {}, "_meta": META},
        },
    ]
    stdin = b"".join(json.dumps(r).encode() + b"\n" for r in requests)
    done = await run([*argv, "--app", "support.which_loop_app:app"], stdin)
    texts = [
        message["result"]["content"][0]["text"]
        for message in map(json.loads, done.stdout.decode().splitlines())
        if message.get("id") == 2 and "result" in message
    ]
    return done, texts


@pytest.mark.parametrize("loop", [[], ["--loop", "trio"]], ids=["default", "trio"])
async def test_the_command_runs_on_trio_by_default_and_with_loop_trio(loop: list[str]) -> None:
    argv = [*STDIO_COMMANDS["mrtr serve --stdio"], *loop]
    done, texts = await call_over_stdio(argv, "which_loop")
    assert done.returncode == 0, done.stderr.decode()
    assert texts == ["trio"]


async def test_loop_asyncio_serves_stdio_and_a_tool_that_awaits_asyncio() -> None:
    argv = [*STDIO_COMMANDS["mrtr serve --stdio"], "--loop", "asyncio"]
    done, texts = await call_over_stdio(argv, "asyncio_only")
    assert done.returncode == 0, done.stderr.decode()
    assert texts == ["asyncio"]


async def test_loop_asyncio_serves_http_and_a_tool_that_awaits_asyncio(tmp_path: Path) -> None:
    # off trio, --http is the one endpoint (McpAsgi) on the ASGI host
    log = tmp_path / "serve.log"
    argv = [*MRTR, "serve", "--http", "127.0.0.1:0", "--loop", "asyncio"]
    with log.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            [*argv, "--app", "support.which_loop_app:app"], stderr=stderr, env=TESTS_ON_PATH
        )
    try:
        with trio.fail_after(20):
            while (found := re.search(r"listening on (http://\S+)", log.read_text())) is None:
                assert process.returncode is None, log.read_text()
                await trio.sleep(0.05)
            async with open_http_client(found.group(1)) as client:
                result = await client.call_tool("asyncio_only")
                assert result["content"][0]["text"] == "asyncio"
                legacy_url = found.group(1)
            async with open_http_client(legacy_url, era="legacy") as client:  # a 2025 session
                result = await client.call_tool("which_loop")
                assert result["content"][0]["text"] == "asyncio"
    finally:
        process.send_signal(signal.SIGTERM)  # drains, then exits 0 ("terminated")
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, log.read_text()


def test_loop_names_a_loop_this_machine_has(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        serve.main(["--stdio", "--loop", "curio"])
    assert caught.value.code == 2
    said = capsys.readouterr().err
    assert "--loop: invalid choice: 'curio'" in said and "'asyncio'" in said and "'trio'" in said
    uvloop = importlib.util.find_spec("uvloop") is not None
    assert ("uvloop" in LOOPS) is uvloop  # offered exactly where it is installed
    assert LOOPS["trio"] == ("trio", {}) and LOOPS["asyncio"] == ("asyncio", {})


def test_there_is_one_serve_entry() -> None:
    # `python -m mrtr_transports.server` was a second entry: the server package has no
    # `__main__` now (`python -m mrtr_transports serve` is the same main as `mrtr serve`).
    assert importlib.util.find_spec("mrtr_transports.server.__main__") is None
    assert importlib.util.find_spec("mrtr_transports.__main__") is not None
