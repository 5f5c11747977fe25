"""Ctrl-C on ``mrtr call``: exit 130 and one line on stderr, wherever the call is waiting.

Each test runs ``mrtr call`` as a real process and sends it ``SIGINT`` once it
is waiting (what Ctrl-C on its terminal delivers; a prompt is tested with a real
terminal in ``test_cli.py``).  The in-process parts: how an interrupt is
recognised through trio's exception groups.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
import trio
from mrtr_transports.cli.interrupts import is_interrupt, run_stoppable
from support.cli_run import MRTR, TESTS_ON_PATH

pytestmark = pytest.mark.subprocess

#: A stdio server whose tool never answers.
SLOW_SERVER = "stdio:" + " ".join([*MRTR, "serve", "--stdio", "--app", "support.cli_slow_app:app"])


def tools_call_sent(trace: Path) -> bool:
    if not trace.exists():
        return False
    records = [json.loads(line) for line in trace.read_text().splitlines() if line.endswith("}")]
    return any(r["dir"] == "send" and r["msg"].get("method") == "tools/call" for r in records)


async def test_ctrl_c_while_a_tool_runs_exits_130_with_one_line(tmp_path: Path) -> None:
    # Regression: it ended with exit 7, as if an answer were missing (or exit 1 and a
    # traceback, where trio's exception group hid the KeyboardInterrupt).
    trace = tmp_path / "trace.ndjson"
    process = await trio.lowlevel.open_process(
        [*MRTR, "call", "--trace", str(trace), SLOW_SERVER, "slow"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=TESTS_ON_PATH,
    )
    try:
        with trio.fail_after(20):
            while not tools_call_sent(trace):  # the call is out: the tool is running
                await trio.sleep(0.05)
            process.send_signal(signal.SIGINT)
            assert process.stdout is not None and process.stderr is not None
            stdout, stderr = b"", b""
            while chunk := await process.stderr.receive_some():
                stderr += chunk
            while chunk := await process.stdout.receive_some():
                stdout += chunk
            assert await process.wait() == 130, stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert stderr == b"mrtr call: interrupted\n" and stdout == b""


def test_an_interrupt_is_recognised_inside_exception_groups() -> None:
    nested = BaseExceptionGroup(
        "outer", [ValueError("x"), BaseExceptionGroup("inner", [KeyboardInterrupt()])]
    )
    assert is_interrupt(KeyboardInterrupt())
    assert is_interrupt(nested)
    assert not is_interrupt(ExceptionGroup("errors", [ValueError("x")]))
    assert not is_interrupt(RuntimeError("no"))


def test_a_command_that_ends_by_itself_keeps_its_exit_code() -> None:
    async def main() -> int:
        await trio.sleep(0)
        return 5

    assert run_stoppable("mrtr test", main) == 5


def test_a_keyboard_interrupt_raised_in_the_run_is_exit_130(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def main() -> int:
        async with trio.open_nursery() as nursery:  # trio wraps it in a group here
            nursery.start_soon(trio.sleep_forever)
            raise KeyboardInterrupt

    assert run_stoppable("mrtr test", main) == 130
    assert capsys.readouterr().err == "mrtr test: interrupted\n"


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGTERM, 0, "terminated"), (signal.SIGINT, 130, "interrupted")],
)
def test_a_graceful_command_drains_on_the_first_signal_and_keeps_its_code(
    signum: signal.Signals, code: int, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `mrtr serve`: the first signal asks it to stop (it drains, then returns by itself).
    stop = trio.Event()
    steps: list[str] = []

    async def main() -> int:
        signal.raise_signal(signum)
        await stop.wait()
        steps.append("drained")
        return 0

    stopping = (signal.SIGINT, signal.SIGTERM)
    assert run_stoppable("mrtr test", main, signals=stopping, on_stop=stop.set) == code
    assert steps == ["drained"]
    assert capsys.readouterr().err == f"mrtr test: {said}\n"


def test_a_second_signal_while_draining_cancels_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stop = trio.Event()
    steps: list[str] = []

    async def main() -> int:
        signal.raise_signal(signal.SIGTERM)
        await stop.wait()
        steps.append("draining")
        signal.raise_signal(signal.SIGINT)
        await trio.sleep_forever()  # a drain that would never end
        raise AssertionError("not cancelled")

    stopping = (signal.SIGINT, signal.SIGTERM)
    assert run_stoppable("mrtr test", main, signals=stopping, on_stop=stop.set) == 0
    assert steps == ["draining"]
    assert capsys.readouterr().err == "mrtr test: terminated\n"  # the first signal's code
