"""``mrtr call`` on a tool that becomes a task (SEP-2663): the task's status changes on
stderr (made safe for a terminal), its questions answered as MRTR rounds' are, every
poll in ``--trace``, the exit codes, and Ctrl-C sending ``tasks/cancel``.  Real
``mrtr`` processes against the scripted task server (tests/support/task_peer.py)."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from support.cli_run import MRTR, TESTS_ON_PATH, mrtr

pytestmark = pytest.mark.subprocess

TASK_PEER = "stdio:" + shlex.join([*MRTR, "serve", "--stdio", "--app", "support.task_peer:app"])
NAME = 'name={"action": "accept", "content": {"name": "Ada"}}'


def records(trace: Path) -> list[dict[str, Any]]:
    if not trace.exists():
        return []
    lines = trace.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def sent(trace: Path, method: str) -> list[dict[str, Any]]:
    return [
        r["msg"] for r in records(trace) if r["dir"] == "send" and r["msg"].get("method") == method
    ]


async def test_a_task_is_answered_shown_and_traced(tmp_path: Path) -> None:
    trace = tmp_path / "trace.ndjson"
    ran = await mrtr(
        "call", "--answer", NAME, "--trace", str(trace), TASK_PEER, "ask", env=TESTS_ON_PATH
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.json() == {"content": [{"type": "text", "text": "hello Ada"}]}
    [task_id] = {msg["params"]["taskId"] for msg in sent(trace, "tasks/get")}
    shown = [line for line in ran.stderr.splitlines() if line.startswith("task ")]
    assert shown == [
        f"task {task_id}: working",
        f"task {task_id}: input_required: waiting for a name",
        f"task {task_id}: completed",
    ]
    # every poll is in the trace, sent and answered
    gets = sent(trace, "tasks/get")
    assert len(gets) >= 2
    answered = {r["msg"].get("id") for r in records(trace) if r["dir"] == "recv"}
    assert all(get["id"] in answered for get in gets)
    [update] = sent(trace, "tasks/update")
    assert update["params"]["inputResponses"] == {
        "name": {"action": "accept", "content": {"name": "Ada"}}
    }


async def test_quiet_shows_no_status(tmp_path: Path) -> None:
    ran = await mrtr("call", "--quiet", TASK_PEER, "quick", env=TESTS_ON_PATH)
    assert ran.returncode == 0, ran.stderr
    assert not [line for line in ran.stderr.splitlines() if line.startswith("task ")]


async def test_a_status_message_never_drives_the_terminal() -> None:
    ran = await mrtr("call", TASK_PEER, "noisy_status", env=TESTS_ON_PATH)
    assert ran.returncode == 0, ran.stderr
    [line] = [line for line in ran.stderr.splitlines() if "pwned" in line]
    assert "\x1b" not in ran.stderr and "\x07" not in ran.stderr and "\u202e" not in ran.stderr
    assert line.endswith(r"working: \x1b]0;pwned\x07red \x1b[31mtext second line \u202eevil")


@pytest.mark.parametrize(
    ("tool", "code", "said"),
    [
        ("tool_error", 1, None),
        ("fail", 3, "error -32603: disk full"),
        ("server_cancel", 3, "the server cancelled task"),
        ("other_id", 3, "answered for task 'someone-elses'"),
    ],
)
async def test_exit_codes(tool: str, code: int, said: str | None) -> None:
    ran = await mrtr("call", TASK_PEER, tool, env=TESTS_ON_PATH)
    assert ran.returncode == code, ran.stderr
    if said is not None:
        assert said in ran.stderr


async def test_no_answer_for_a_tasks_question_is_exit_7(tmp_path: Path) -> None:
    trace = tmp_path / "trace.ndjson"
    ran = await mrtr("call", "--trace", str(trace), TASK_PEER, "ask", env=TESTS_ON_PATH)
    assert ran.returncode == 7, ran.stderr
    assert "'name'" in ran.stderr
    assert len(sent(trace, "tasks/cancel")) == 1  # the task is given up on the server too


async def test_ctrl_c_sends_tasks_cancel_then_exits_130(tmp_path: Path) -> None:
    trace = tmp_path / "trace.ndjson"
    process = await trio.lowlevel.open_process(
        [*MRTR, "call", "--trace", str(trace), TASK_PEER, "forever"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=TESTS_ON_PATH,
    )
    try:
        with trio.fail_after(20):
            while len(sent(trace, "tasks/get")) < 2:  # the task is being polled
                await trio.sleep(0.05)
            process.send_signal(signal.SIGINT)
            assert process.stdout is not None and process.stderr is not None
            stderr = b""
            while chunk := await process.stderr.receive_some():
                stderr += chunk
            assert await process.wait() == 130, stderr
            assert stderr.decode().splitlines()[-1] == "mrtr call: interrupted"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    [cancel] = sent(trace, "tasks/cancel")
    task_ids = {msg["params"]["taskId"] for msg in sent(trace, "tasks/get")}
    assert task_ids == {cancel["params"]["taskId"]}
    # and the server acknowledged it before the command ended
    assert any(r["dir"] == "recv" and r["msg"].get("id") == cancel["id"] for r in records(trace))


# --- at a real terminal ---------------------------------------------------------------------


async def _at_terminal(user: Any, *args: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [*MRTR, *args],
        stdin=user.slave_fd,
        stdout=subprocess.PIPE,
        stderr=user.slave_fd,
        env=TESTS_ON_PATH,
    )


async def test_a_tasks_question_is_asked_at_the_terminal() -> None:
    from support.cli_pty import PtyUser

    user = PtyUser()
    try:
        process = await _at_terminal(user, "call", TASK_PEER, "ask")
        screen = await user.expect("[a]ccept / [d]ecline / [c]ancel: ", timeout=15)
        assert "Your name?" in screen and "input_required: waiting for a name" in screen
        await user.type("a\n")
        await user.expect("name (string, required): ")
        await user.type("Grace\n")
        assert process.stdout is not None
        out = b""
        with trio.fail_after(15):
            while chunk := await process.stdout.receive_some():
                out += chunk
            assert await process.wait() == 0, user.output
        assert json.loads(out)["content"][0]["text"] == "hello Grace"
        assert user.output.count("Your name?") == 1  # asked once, polls or not
    finally:
        await user.aclose()


async def test_ctrl_c_at_a_tasks_prompt_cancels_the_task(tmp_path: Path) -> None:
    from support.cli_pty import PtyUser

    trace = tmp_path / "trace.ndjson"
    user = PtyUser()
    try:
        process = await _at_terminal(user, "call", "--trace", str(trace), TASK_PEER, "forever_ask")
        await user.expect("[a]ccept / [d]ecline / [c]ancel: ", timeout=15)
        process.send_signal(signal.SIGINT)
        with trio.fail_after(15):
            assert await process.wait() == 130, user.output
    finally:
        if process.returncode is None:
            process.kill()
        await user.aclose()
    [cancel] = sent(trace, "tasks/cancel")
    assert any(r["dir"] == "recv" and r["msg"].get("id") == cancel["id"] for r in records(trace))
    assert not sent(trace, "tasks/update")


async def test_the_example_apps_long_work_is_a_task_that_mrtr_call_drives(
    tmp_path: Path,
) -> None:
    # The example server's build_report, as an app author ships it: each row shown as the
    # task's status message, the question mid-task answered from --answer.
    from support.cli_run import STDIO_EXAMPLE

    publish = 'publish={"action": "accept", "content": {"publish": true, "title": "Q3"}}'
    trace = tmp_path / "trace.ndjson"
    ran = await mrtr(
        "call",
        "--answer",
        publish,
        "--trace",
        str(trace),
        STDIO_EXAMPLE,
        "build_report",
        '{"rows": 2}',
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.json()["content"] == [{"type": "text", "text": "Published 'Q3': 2 rows."}]
    shown = [line.split(": ", 1)[1] for line in ran.stderr.splitlines() if line.startswith("task ")]
    assert shown[0].startswith("working")
    assert "input_required: 2 rows built: waiting for your answer" in shown
    assert shown[-1] == "completed"  # (a terminal status shows no stale message)
    [update] = sent(trace, "tasks/update")
    assert update["params"]["inputResponses"]["publish"]["content"]["title"] == "Q3"
