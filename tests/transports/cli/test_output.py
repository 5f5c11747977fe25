"""What ``mrtr call`` writes never crashes it: any depth of result, a stdout closed early.

The end-to-end tests run ``mrtr call`` against ``tests/support/deep_result_server.py``,
a real stdio server whose result nests lists as deep as asked: as deep as the
decoder's ``max_depth`` (128) admits, printed and traced, and 1,000 deep
(``json.dumps(indent=2)`` recursed once per level and raised ``RecursionError``),
which now fails the call at once with one line.  The printer
(``mrtr_transports.cli.json_text``) and the trace's redaction are also tested in
process, far deeper.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.cli import json_text
from mrtr_transports.cli.trace import REDACTED, line_text, redact
from support.cli_run import MRTR, STDIO_FIXTURES, mrtr

DEEP_SERVER = Path(__file__).resolve().parents[2] / "support" / "deep_result_server.py"
#: The deepest result the default bound admits: the envelope, ``result`` and
#: ``structuredContent`` are 3 levels around it (and past 64 levels the printer
#: stops indenting, which this depth reaches).
DEPTH = 125


def nested_lists(depth: int, bottom: Any = "bottom") -> list[Any]:
    value: Any = bottom
    for _ in range(depth):
        value = [value]
    result: list[Any] = value
    return result


def compact_deep_result(depth: int) -> str:
    """The deep server's result as compact JSON text, without any whitespace."""
    nested = "[" * depth + '"bottom"' + "]" * depth
    return '{"content":[{"type":"text","text":"deep"}],"structuredContent":{"deep":' + nested + "}}"


@pytest.mark.subprocess
async def test_a_result_as_deep_as_the_bound_is_printed_and_traced(tmp_path: Path) -> None:
    trace = tmp_path / "trace.ndjson"
    target = "stdio:" + shlex.join([sys.executable, str(DEEP_SERVER), str(DEPTH)])
    ran = await mrtr("call", "--trace", str(trace), target, "anything", timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == ""
    # The whole value, indented as json.dumps(indent=2) would for the first levels.
    assert "".join(ran.stdout.split()) == compact_deep_result(DEPTH)
    assert ran.stdout.startswith('{\n  "content": [\n    {\n      "type": "text",')
    # Past MAX_INDENTED_DEPTH levels it goes on one line (indenting all 125 would
    # take over 16,000 characters of margins alone).
    assert len(ran.stdout) < 10_000
    received = [line for line in trace.read_text().splitlines() if '"dir": "recv"' in line]
    deep_line = next(line for line in received if '"bottom"' in line)
    assert "[" * DEPTH + '"bottom"' + "]" * DEPTH in deep_line


@pytest.mark.subprocess
async def test_a_result_nested_1000_deep_fails_the_call_at_once_with_one_line() -> None:
    # The answer is unreadable past max_depth, but its id is read: the call ends with
    # that error (it used to wait forever for the answer it had been given).
    target = "stdio:" + shlex.join([sys.executable, str(DEEP_SERVER), "1000"])
    ran = await mrtr("call", target, "anything", timeout=30)
    assert ran.returncode == 3, ran.stderr  # a JSON-RPC error ended the call
    assert ran.stdout == ""
    assert ran.stderr.splitlines() == [
        "mrtr call: error -32700: unreadable answer: "
        "parse error: the message nests deeper than max_depth=128"
    ]


@pytest.mark.subprocess
async def test_a_stdout_closed_before_the_result_is_a_line_on_stderr_not_a_traceback() -> None:
    # `mrtr call ... | head -c 0`: the reader is gone before the result is written.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        with trio.fail_after(20):
            done = await trio.run_process(
                [*MRTR, "call", STDIO_FIXTURES, "test_simple_text"],
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                capture_stderr=True,
                check=False,
            )
    finally:
        os.close(write_end)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr  # the call's own exit code stands
    assert stderr == "mrtr call: stdout was closed before the whole result was written\n"


# --- The printer ----------------------------------------------------------------------


SAMPLES: list[Any] = [
    {},
    [],
    0,
    -1.5,
    10**30,
    1e300,
    "plain",
    'quote " backslash \\ newline \n tab \t',
    "é ü 日本 🎉",
    None,
    True,
    False,
    [[[]], {}, [{}]],
    {"a": [1, 2, {"b": []}], "c": {}, "d": {"e": None}},
    {1: "int key", 2.5: "float key", False: "bool key", None: "null key"},
    (1, ("tuple", "inside")),
]


@pytest.mark.parametrize("indent", [None, 0, 2, 4])
@pytest.mark.parametrize("value", SAMPLES, ids=range(len(SAMPLES)))
def test_the_printer_writes_exactly_what_json_dumps_writes(value: Any, indent: int | None) -> None:
    assert json_text.dumps(value, indent=indent) == json.dumps(
        value, indent=indent, ensure_ascii=False
    )


def test_nesting_up_to_the_indented_depth_is_json_dumps_text_and_deeper_is_one_line() -> None:
    at_limit = nested_lists(json_text.MAX_INDENTED_DEPTH)
    assert json_text.dumps(at_limit) == json.dumps(at_limit, indent=2)
    deeper = nested_lists(json_text.MAX_INDENTED_DEPTH, bottom=[1, [2, {"k": "v"}]])
    lines = json_text.dumps(deeper).splitlines()
    margin = " " * (2 * json_text.MAX_INDENTED_DEPTH)
    assert margin + '[1, [2, {"k": "v"}]]' in lines


@pytest.mark.slow
def test_the_printer_has_no_depth_limit() -> None:
    depth = 100_000  # far past the interpreter's recursion limit
    value = {"deep": nested_lists(depth)}
    for indent in (None, 2):
        text = json_text.dumps(value, indent=indent)
        assert "".join(text.split()) == '{"deep":' + "[" * depth + '"bottom"' + "]" * depth + "}"
    deep_trace_line = line_text({"msg": redact(value)})  # the trace's path too
    assert deep_trace_line.startswith('{"msg": {"deep": [[[') and len(deep_trace_line) < 3 * depth


def test_the_printer_refuses_what_json_dumps_refuses() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        json_text.dumps(cycle)
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        json_text.dumps({"x": object()})
    with pytest.raises(TypeError, match="keys must be"):
        json_text.dumps({("tuple", "key"): 1})
    assert json_text.dumps({"x": {1, 2}}, indent=None, default=sorted) == '{"x": [1, 2]}'
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        json_text.dumps({"x": {1}}, default=lambda value: value)  # still nothing JSON knows


def test_a_lone_surrogate_is_written_escaped_so_it_can_be_printed() -> None:
    # The standard library's reader turns "\ud800" into a str no UTF-8 stream takes.
    text = json_text.dumps({"bad": json.loads('"a\\ud800b"'), "good": "é"}, indent=None)
    assert text == '{"bad": "a\\ud800b", "good": "é"}'
    text.encode("utf-8")


def test_redaction_keeps_the_order_and_works_at_any_depth() -> None:
    message = {"b": 1, "password": "hunter2", "a": [{"token": "t", "x": "Bearer abc"}]}
    assert redact(message) == {
        "b": 1,
        "password": REDACTED,
        "a": [{"token": REDACTED, "x": f"Bearer {REDACTED}"}],
    }
    assert list(redact(message)) == ["b", "password", "a"]
    deep = redact(nested_lists(50_000, bottom={"api_key": "k"}))
    for _ in range(50_000):
        (deep,) = deep
    assert deep == {"api_key": REDACTED}
