"""``mrtr`` as a person runs it: real subprocesses, a real stdio server, a real HTTP server.

Every exit code of ``mrtr call`` (0..7) is produced for real; the trace of a
two-round flow is read back; ``mrtr state inspect`` names each failing check;
an interactive call is answered through a pseudo-terminal.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from support.cli_pty import PtyUser
from support.cli_run import (
    MRTR,
    STDIO_EXAMPLE,
    STDIO_FIXTURES,
    TESTS_ON_PATH,
    mrtr,
    mrtr_all,
    python_target,
)
from support.serve_subprocess import mrtr_serve

import mrtr_core as m

pytestmark = pytest.mark.subprocess

WEATHER_ANSWERS = {
    "city": {"action": "accept", "content": {"city": "Paris"}},
    "units": {"action": "accept", "content": {"units": "C"}},
}


@pytest.fixture
def answers_file(tmp_path):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(WEATHER_ANSWERS))
    return str(path)


# --- mrtr call over stdio ------------------------------------------------------------------


async def test_a_two_round_flow_over_stdio_prints_the_result(answers_file):
    ran = await mrtr("call", "--answers", answers_file, STDIO_EXAMPLE, "weather", "{}")
    assert ran.returncode == 0, ran.stderr
    result = ran.json()
    assert result["content"][0]["text"] == "Paris: 21 C, sunny"
    assert result.get("isError") is not True


# Every exit code of `mrtr call`, produced for real (split in groups to keep each test short).


async def test_exit_0_a_result_and_1_a_tool_error():
    ok, tool_error = await mrtr_all(
        [
            ["call", STDIO_FIXTURES, "test_simple_text"],
            ["call", STDIO_FIXTURES, "test_error_handling"],
        ]
    )
    assert (ok.returncode, tool_error.returncode) == (0, 1), (ok.stderr, tool_error.stderr)
    assert ok.json()["content"][0]["text"] == "This is a simple text response for testing."
    assert tool_error.json()["isError"] is True


async def test_exit_2_usage(tmp_path):
    bad_answers = tmp_path / "bad.json"
    bad_answers.write_text("[not an object")
    not_object, bad_file = await mrtr_all(
        [
            ["call", STDIO_EXAMPLE, "weather", "[1]"],
            ["call", "--answers", str(bad_answers), STDIO_EXAMPLE, "weather"],
        ]
    )
    assert (not_object.returncode, bad_file.returncode) == (2, 2)
    assert "ARGS_JSON must be a JSON object" in not_object.stderr
    assert "not JSON" in bad_file.stderr
    assert not_object.stdout == bad_file.stdout == ""  # stdout is only ever the result


async def test_exit_3_a_json_rpc_error_and_4_timed_out():
    rpc_error, timed_out = await mrtr_all(
        [
            ["call", STDIO_EXAMPLE, "no_such_tool"],
            # A server that never answers, and a budget for the whole call.
            ["call", "--timeout", "0.5", python_target("import sys; sys.stdin.read()"), "x"],
        ]
    )
    assert (rpc_error.returncode, timed_out.returncode) == (3, 4), (
        rpc_error.stderr,
        timed_out.stderr,
    )
    assert "-32602" in rpc_error.stderr and "Unknown tool: no_such_tool" in rpc_error.stderr
    assert '"name": "no_such_tool"' in rpc_error.stderr  # the error's data is shown too
    assert "timed out" in timed_out.stderr
    assert rpc_error.stdout == timed_out.stdout == ""


async def test_exit_4_when_the_server_takes_the_call_but_never_answers():
    # `serve --app` with a test app whose tool never returns: the client's own budget ends it.
    slow = "stdio:" + " ".join([*MRTR, "serve", "--stdio", "--app", "support.cli_slow_app:app"])
    # (issue 22: --timeout is the server's time at each step; 5 s leaves the server's
    # start-up, which the handshake's deadline counts, room on a busy machine)
    ran = await mrtr("call", "--timeout", "5", slow, "slow", env=TESTS_ON_PATH)
    assert ran.returncode == 4, ran.stderr
    assert "timed out: the server did not answer a leg of the call within 5 s" in ran.stderr
    assert ran.stdout == ""


async def test_exit_5_round_cap_and_6_transport_failure(answers_file):
    capped, died = await mrtr_all(
        [
            # weather needs two rounds; the cap is one.
            ["call", "--max-rounds", "1", "--answers", answers_file, STDIO_EXAMPLE, "weather"],
            # The server process dies before answering (its last stderr lines are shown).
            ["call", python_target("import sys; print('boom', file=sys.stderr); sys.exit(3)"), "x"],
        ]
    )
    assert (capped.returncode, died.returncode) == (5, 6), (capped.stderr, died.stderr)
    assert "round cap" in capped.stderr and "max_rounds=1" in capped.stderr
    assert "transport failure" in died.stderr and "boom" in died.stderr
    assert capped.stdout == died.stdout == ""


async def test_exit_5_when_the_state_only_leg_cap_is_exceeded():
    # Regression: there was no --max-state-only-legs, and Client.call never passed it on.
    peer = str(Path(__file__).resolve().parents[2] / "support" / "peer_stdio_server.py")
    server = "stdio:" + shlex.join([sys.executable, peer])
    capped, enough = await mrtr_all(
        [
            ["call", "--max-state-only-legs", "1", server, "state_only", '{"legs": 3}'],
            ["call", "--max-state-only-legs", "3", server, "state_only", '{"legs": 3}'],
        ]
    )
    assert capped.returncode == 5, capped.stderr
    assert "round cap" in capped.stderr and "max_state_only_legs=1" in capped.stderr
    assert capped.stdout == ""
    assert enough.returncode == 0, enough.stderr
    assert enough.json()["content"][0]["text"] == "legs=3"


def test_each_client_error_carries_its_exit_code_and_the_cli_exits_with_it():
    from mrtr_transports.cli.call import exit_code_for
    from mrtr_transports.cli.exit_codes import ExitCode
    from mrtr_transports.client import errors

    cases = [
        (errors.CallError(m.ErrorCode.INVALID_PARAMS, "bad arguments"), 3),
        (errors.CallError(m.ErrorCode.MISSING_CLIENT_CAPABILITY, "needs sampling"), 7),
        (errors.CallTimeout(1.0, 1.0, "total"), 4),
        (errors.RoundCapExceeded(10, limit_name="max_state_only_legs"), 5),
        (errors.TransportError("the server went away"), 6),
        (errors.InputUnavailable("nobody to ask"), 7),
        (errors.ClientError("cannot send the next leg"), 3),
    ]
    assert [exit_code_for(error) for error, _ in cases] == [code for _, code in cases]
    assert exit_code_for(RuntimeError("not a client error")) is None
    assert [int(code) for code in ExitCode] == [*range(8), 130]  # docs/cli.md's table
    assert {error.exit_code for error, _ in cases} <= set(ExitCode)  # each one a row of it


async def test_exit_7_no_answer_available():
    nothing, missing_key = await mrtr_all(
        [
            # Nothing can answer, so nothing is declared: the server refuses with -32021.
            ["call", STDIO_EXAMPLE, "weather"],
            # Elicitation is declared (an entry for "units"), but "city" has no answer.
            ["call", "--answer", 'units="decline"', STDIO_EXAMPLE, "weather"],
        ]
    )
    assert (nothing.returncode, missing_key.returncode) == (7, 7), (
        nothing.stderr,
        missing_key.stderr,
    )
    assert "-32021" in nothing.stderr and '"elicitation"' in nothing.stderr
    assert "--answers" in nothing.stderr
    assert "'city'" in missing_key.stderr and "(elicitation/create)" in missing_key.stderr
    assert "stdin is not a terminal" in missing_key.stderr
    assert nothing.stdout == missing_key.stdout == ""


async def test_argument_errors_exit_2_and_help_documents_the_exit_codes():
    runs = await mrtr_all(
        [
            ["call", "--help"],
            ["call", "ftp://example.com", "tool"],
            ["call", "--max-rounds", "0", STDIO_EXAMPLE, "tool"],
            ["call", "--answer", "novalue", STDIO_EXAMPLE, "tool"],
            ["call", "--root", "https://example.com/x", STDIO_EXAMPLE, "tool"],
            ["frobnicate"],
        ]
    )
    help_run, *errors = runs
    assert help_run.returncode == 0
    for code in range(8):
        assert re.search(rf"^\s+{code}\s+\S", help_run.stdout, re.MULTILINE), code
    assert [r.returncode for r in errors] == [2, 2, 2, 2, 2]
    assert "expected http(s)://... or stdio:COMMAND" in errors[0].stderr
    assert "--root" in errors[3].stderr and "file://" in errors[3].stderr


async def test_the_client_declares_only_what_it_can_answer(tmp_path):
    trace = tmp_path / "trace.ndjson"
    answers = tmp_path / "a.json"
    answers.write_text(json.dumps({"sampling/createMessage": "hello"}))
    ran = await mrtr(
        "call",
        "--answers",
        str(answers),
        "--root",
        "file:///srv/project",
        "--trace",
        str(trace),
        STDIO_FIXTURES,
        "test_simple_text",
    )
    assert ran.returncode == 0, ran.stderr
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    sent = [r["msg"] for r in records if r["dir"] == "send" and "method" in r["msg"]]
    call = next(msg for msg in sent if msg["method"] == "tools/call")
    caps = call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    # no elicitation: nothing could answer it (and the tasks extension: it takes a task)
    assert caps == {
        "sampling": {},
        "roots": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }


async def test_decline_all_sends_declines(tmp_path):
    ran = await mrtr("call", "--decline-all", STDIO_EXAMPLE, "deploy", '{"env": "prod"}')
    assert ran.returncode == 1, ran.stderr  # declined: the tool says so with a tool error
    text = ran.json()["content"][0]["text"]
    assert text == "Not deployed to prod: you declined to answer 'Deploy now?'."


# --- --trace -------------------------------------------------------------------------------


async def test_the_trace_holds_every_message_with_the_echoed_state(tmp_path):
    trace = tmp_path / "trace.ndjson"
    answers = {
        **WEATHER_ANSWERS,
        # An extra form field the server ignores: the trace must not show its value.
        "units": {"action": "accept", "content": {"units": "F", "password": "hunter2"}},
    }
    ran = await mrtr(
        "call",
        "--answer",
        "city=" + json.dumps(answers["city"]),
        "--answer",
        "units=" + json.dumps(answers["units"]),
        "--trace",
        str(trace),
        STDIO_EXAMPLE,
        "weather",
    )
    assert ran.returncode == 0, ran.stderr
    text = trace.read_text()
    assert "hunter2" not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert all(set(r) >= {"dir", "t", "flow", "round", "msg"} for r in records)
    assert all("warning" not in r for r in records)
    assert [r["t"] for r in records] == sorted(r["t"] for r in records)
    assert records[0]["t"] >= 0
    legs = [r for r in records if r["dir"] == "send" and r["msg"].get("method") == "tools/call"]
    leg_ids = {leg["msg"]["id"] for leg in legs}
    answers_to_legs = [r for r in records if r["dir"] == "recv" and r["msg"].get("id") in leg_ids]
    assert len(legs) == 3 and len(answers_to_legs) == 3  # two input rounds, then the result
    assert len({leg["msg"]["id"] for leg in legs}) == 3  # a fresh id per leg
    assert {leg["flow"] for leg in legs} == {legs[0]["flow"]} and legs[0]["flow"] is not None
    # Each retry echoes, byte for byte, the requestState of the answer before it.
    for leg, previous in zip(legs[1:], answers_to_legs[:-1], strict=True):
        assert previous["msg"]["result"]["resultType"] == "input_required"
        assert leg["msg"]["params"]["requestState"] == previous["msg"]["result"]["requestState"]
    units = legs[2]["msg"]["params"]["inputResponses"]["units"]["content"]
    assert units == {"units": "F", "password": "[REDACTED]"}
    assert answers_to_legs[-1]["msg"]["result"]["content"][0]["text"] == "Paris: 70 F, sunny"


# --- An interactive call through a pseudo-terminal -----------------------------------------


async def _interactive(user: PtyUser, *args: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [*MRTR, "call", *args],
        stdin=user.slave_fd,
        stdout=subprocess.PIPE,
        stderr=user.slave_fd,
    )


async def _stdout_of(process: trio.Process, timeout: float = 10.0) -> tuple[int, str]:
    assert process.stdout is not None
    chunks = []
    with trio.fail_after(timeout):
        while chunk := await process.stdout.receive_some():
            chunks.append(chunk)
        code = await process.wait()
    return code, b"".join(chunks).decode()


async def test_an_interactive_call_asks_on_the_terminal():
    user = PtyUser()
    try:
        process = await _interactive(user, STDIO_EXAMPLE, "weather")
        await user.expect("[a]ccept / [d]ecline / [c]ancel: ", timeout=10)
        await user.type("a\n")
        await user.expect("city (string, required): ")
        await user.type("Lyon\n")
        screen = await user.expect("[c]ancel: ")
        assert "Units?" in screen
        await user.type("a\n")
        screen = await user.expect("units (string, required): ")
        assert "1) C" in screen and "2) F" in screen
        await user.type("2\n")
        # A terminal can answer sampling too, so the client declared it: a tone comes next.
        screen = await user.expect("Reply (one line; /refuse to refuse): ")
        assert "Describe sunshine in three words" in screen
        await user.type("bright warm gold\n")
        code, out = await _stdout_of(process)
        assert code == 0
        assert json.loads(out)["content"][0]["text"] == "Lyon: 70 F, bright warm gold"
    finally:
        await user.aclose()


@pytest.mark.parametrize(("abort", "exit_code"), [("ctrl-c", 130), ("ctrl-d", 7)])
async def test_a_prompt_ended_by_ctrl_c_or_ctrl_d_sends_no_decline(tmp_path, abort, exit_code):
    # Ctrl-D: no answer (exit 7).  Ctrl-C: stop the command (exit 130), no traceback.
    trace = tmp_path / "trace.ndjson"
    user = PtyUser()
    try:
        process = await _interactive(
            user, "--trace", str(trace), STDIO_EXAMPLE, "deploy", '{"env": "prod"}'
        )
        await user.expect("[c]ancel: ", timeout=10)
        if abort == "ctrl-c":
            process.send_signal(signal.SIGINT)  # what Ctrl-C on this terminal delivers
        else:
            await user.type("\x04")  # Ctrl-D: end of input
        code, out = await _stdout_of(process)
        assert code == exit_code and out == ""
        screen = await user.drain(0.2)
        if abort == "ctrl-c":  # the prompt's line ended, then one line
            assert screen == "\r\nmrtr call: interrupted\r\n", screen
        else:
            assert "end of input" in screen and "Traceback" not in screen, screen
    finally:
        await user.aclose()
    legs = [
        json.loads(line)["msg"]
        for line in trace.read_text().splitlines()
        if json.loads(line)["msg"].get("method") == "tools/call"
    ]
    assert len(legs) == 1  # the first leg only: no answer (no decline) was ever sent


# --- mrtr serve --http ----------------------------------------------------------------------


#: A confirmed deploy: a call of the example app that ends with a result (exit 0).
CONFIRMED = 'confirm={"action": "accept", "content": {"confirm": true}}'


async def test_serve_http_on_a_free_port_and_call_it(answers_file, tmp_path):
    trace = tmp_path / "http-trace.ndjson"
    async with mrtr_serve(["--http", "127.0.0.1:0"], tmp_path / "serve.log") as target:
        simple, weather, rounds = await mrtr_all(
            [
                ["call", "--answer", CONFIRMED, target, "deploy"],
                ["call", "--answers", answers_file, "--trace", str(trace), target, "weather"],
                ["call", "--max-rounds", "1", "--answers", answers_file, target, "weather"],
            ]
        )
        assert simple.returncode == 0, simple.stderr
        assert weather.returncode == 0, weather.stderr
        assert weather.json()["content"][0]["text"] == "Paris: 21 C, sunny"
        assert rounds.returncode == 5
        records = [json.loads(line) for line in trace.read_text().splitlines()]
        retries = [
            r
            for r in records
            if r["dir"] == "send" and "requestState" in r["msg"].get("params", {})
        ]
        assert len(retries) == 2 and all("warning" not in r for r in records)


async def test_an_unreachable_http_server_is_a_transport_failure():
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ran = await mrtr("call", f"http://127.0.0.1:{port}/mcp", "weather")
    assert ran.returncode == 6, ran.stderr
    assert "transport failure" in ran.stderr


# --- mrtr state inspect ---------------------------------------------------------------------

SECRET = bytes(range(32))
OTHER = bytes(range(100, 132))
PARAMS = {"name": "deploy", "arguments": {"env": "prod"}}


def b64(secret: bytes) -> str:
    return base64.urlsafe_b64encode(secret).decode().rstrip("=")


def sealed(**overrides: Any) -> str:
    sealer = m.server.StateSealer({"k1": SECRET}, "k1")
    options: dict[str, Any] = {
        "method": "tools/call",
        "params": PARAMS,
        "principal": "ada",
        "now": time.time(),
        **overrides,
    }
    return sealer.seal({"step": 2}, **options)


def tampered(token: str) -> str:
    version, key_id, body, mac = token.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["s"] = {"step": 99}
    forged = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
    return ".".join([version, key_id, forged, mac])


def inspect(token: str, *extra: str, key: str | None = None) -> list[str]:
    binding = ["--method", "tools/call", "--params", json.dumps(PARAMS), "--principal", "ada"]
    return ["state", "inspect", "--key", key or f"k1:{b64(SECRET)}", *binding, *extra, token]


def test_state_inspect_names_the_check_that_fails(capsys):
    # In-process (cli.main) for speed; the subprocess test below runs the same code for real.
    from mrtr_transports.cli import main as cli

    token = sealed()
    cases = {
        "valid": inspect(token),
        "bad_signature": inspect(tampered(token)),
        "bad_signature (wrong secret)": inspect(token, key=f"k1:{b64(OTHER)}"),
        "expired": inspect(token, "--now", str(time.time() + 3600)),
        "unknown_key": inspect(token, key=f"k2:{b64(SECRET)}"),
        "wrong_principal": inspect(token, "--principal", "bob"),
        "wrong_params": inspect(token, "--params", json.dumps({**PARAMS, "name": "other"})),
        "wrong_method": inspect(token, "--method", "prompts/get"),
        "malformed": inspect("not-a-token"),
        "unsupported_version": inspect("mrtr9." + token.split(".", 1)[1]),
    }
    outputs = {}
    for name, argv in cases.items():
        code = cli.main(argv)
        outputs[name] = (code, capsys.readouterr().out)
    code, out = outputs.pop("valid")
    assert code == 0, out
    assert "verdict: valid" in out and '"step": 2' in out
    for name, (code, out) in outputs.items():
        reason = name.split()[0]
        assert code == 1, (name, out)
        assert f"verdict: {reason}:" in out, (name, out)
    assert "tampered" in outputs["bad_signature"][1]
    assert "UNVERIFIED" in outputs["bad_signature"][1]  # the payload is shown, flagged
    assert "another request" in outputs["wrong_params"][1]
    assert "another principal" in outputs["wrong_principal"][1]


async def test_state_inspect_as_a_subprocess(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(base64.b64encode(SECRET).decode() + "\n")
    valid, forged, from_file = await mrtr_all(
        [
            inspect(sealed()),
            inspect(sealed(), key=f"k1:{b64(OTHER)}"),
            # A key without an id is the token's own key id; @FILE keeps it out of `ps`.
            ["state", "inspect", "--key", f"@{key_file}", sealed(principal=None)],
        ]
    )
    assert valid.returncode == 0 and "verdict: valid" in valid.stdout, valid.stderr
    assert forged.returncode == 1 and "verdict: bad_signature" in forged.stdout
    assert from_file.returncode == 0, from_file.stderr
    assert "not checked: params" in from_file.stdout and '"step": 2' in from_file.stdout


def test_state_inspect_without_the_binding_and_its_usage_errors(capsys):
    from mrtr_transports.cli import main as cli

    unbound = sealed(principal=None)
    key = f"k1:{b64(SECRET)}"
    assert cli.main(["state", "inspect", "--key", key, unbound]) == 0
    out = capsys.readouterr().out
    assert "not checked: params" in out and '"step": 2' in out
    # Bound to a principal, but none given: that check is reported as not made, not failed.
    bound = sealed()
    params = json.dumps(PARAMS)
    assert (
        cli.main(["state", "inspect", "--key", f"k1:{b64(SECRET)}", "--params", params, bound]) == 0
    )
    assert "give --principal" in capsys.readouterr().out
    assert cli.main(["state", "inspect", "--key", "k1:AAAA", unbound]) == 2
    assert "at least 16 bytes" in capsys.readouterr().err
    assert (
        cli.main(["state", "inspect", "--key", f"k1:{b64(SECRET)}", "--params", "[1]", unbound])
        == 2
    )
    assert "--params" in capsys.readouterr().err


def test_the_module_runs_as_a_script_and_the_console_entry_is_main():
    from mrtr_transports.cli import main as cli

    assert callable(cli.main)
    done = subprocess.run(
        [*MRTR, "--help"], capture_output=True, text=True, timeout=10, check=False
    )
    assert done.returncode == 0 and "serve" in done.stdout and "call" in done.stdout
