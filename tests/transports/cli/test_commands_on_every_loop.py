"""The client commands on every loop: ``mrtr call``, ``mrtr list`` and ``mrtr get-prompt``
run in-process (``run_call``/``run_list``, the functions ``mrtr`` runs), marked ``anyio``
so each runs on trio and on asyncio, against the example server over stdio (a real
``mrtr serve --stdio`` child).  The command's own runner (:func:`run_stoppable`, its
signal watcher included) is run on asyncio too."""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path

import pytest
from mrtr_transports.cli.call import run_call
from mrtr_transports.cli.interrupts import run_stoppable
from mrtr_transports.cli.listing import run_list
from mrtr_transports.cli.main import build_parser
from support.cli_run import MRTR, STDIO_EXAMPLE, TESTS_ON_PATH

#: Each test starts a `mrtr serve --stdio` child (seconds under load): out of `make check`.
pytestmark = pytest.mark.subprocess

WEATHER_ANSWERS = {
    "city": {"action": "accept", "content": {"city": "Paris"}},
    "units": {"action": "accept", "content": {"units": "C"}},
}
CACHE_APP = "stdio:" + " ".join([*MRTR, "serve", "--stdio", "--app", "support.cache_app:app"])
SLOW = "stdio:" + " ".join([*MRTR, "serve", "--stdio", "--app", "support.cli_slow_app:app"])


@pytest.fixture
def answers_file(tmp_path: Path) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(WEATHER_ANSWERS))
    return str(path)


async def run(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    runner = run_list if args.command == "list" else run_call
    code = await runner(args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.anyio
async def test_call_two_rounds_with_a_trace(answers_file: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.ndjson"
    code, out, err = await run(
        "call", "--answers", answers_file, "--trace", str(trace), STDIO_EXAMPLE, "weather"
    )
    assert code == 0, err
    assert json.loads(out)["content"][0]["text"] == "Paris: 21 C, sunny"
    sent = [json.loads(line) for line in trace.read_text().splitlines()]
    retries = [r for r in sent if r["dir"] == "send" and "requestState" in r["msg"]["params"]]
    assert len(retries) == 2


@pytest.mark.anyio
async def test_list_get_prompt_and_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", TESTS_ON_PATH["PYTHONPATH"])  # (for support.cache_app)
    code, out, err = await run("list", "--json", CACHE_APP, "prompts")
    assert code == 0, err
    assert [p["name"] for p in json.loads(out)["prompts"]] == ["greet"]
    code, out, err = await run("get-prompt", CACHE_APP, "greet")
    assert code == 0, err
    assert "Hello" in out
    code, out, err = await run("read", CACHE_APP, "test://public")
    assert code == 0, err
    assert "public revision 0" in out


@pytest.mark.anyio
async def test_call_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", TESTS_ON_PATH["PYTHONPATH"])  # (for support.cli_slow_app)
    # (3 s, not less: the server's own start is a step too, and a loaded machine has
    # taken over half a second for it, which timed out the handshake instead of the call)
    code, _, err = await run("call", "--timeout", "3", SLOW, "slow")
    assert code == 4, err
    # (issue 22: --timeout is the server's time at each step, and the line says so)
    assert "timed out: the server did not answer" in err and "(--timeout 3;" in err


def test_the_commands_runner_on_asyncio(answers_file: str) -> None:
    args = build_parser().parse_args(["call", "--answers", answers_file, STDIO_EXAMPLE, "weather"])
    out = io.StringIO()
    main = functools.partial(run_call, args, stdout=out)
    assert run_stoppable("mrtr call", main, backend="asyncio") == 0
    assert json.loads(out.getvalue())["content"][0]["text"] == "Paris: 21 C, sunny"
