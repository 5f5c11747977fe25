"""The terminal prompts of the client commands, through a real pseudo-terminal.

The questions of one round come in the server's order, the same on every run;
asked for roots with no ``--root``, ``mrtr call`` asks for them at the
terminal (paths or ``file://`` URIs); ``mrtr get-prompt`` and ``mrtr read`` ask
like ``mrtr call`` does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import trio
from support.calling_app import STDIO_TARGET as STDIO
from support.cli_pty import PtyUser
from support.cli_run import MRTR, TESTS_ON_PATH

pytestmark = pytest.mark.subprocess


async def _interactive(user: PtyUser, *args: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [*MRTR, *args],
        stdin=user.slave_fd,
        stdout=subprocess.PIPE,
        stderr=user.slave_fd,
        env=TESTS_ON_PATH,
    )


async def _result(process: trio.Process, timeout: float = 15.0) -> tuple[int, str]:
    assert process.stdout is not None
    chunks = []
    with trio.fail_after(timeout):
        while chunk := await process.stdout.receive_some():
            chunks.append(chunk)
        code = await process.wait()
    return code, b"".join(chunks).decode()


async def _answer(user: PtyUser, key: str) -> None:
    screen = await user.expect("[a]ccept / [d]ecline / [c]ancel: ", timeout=15)
    assert f"The server asks: Question {key}?" in screen, screen
    await user.type("a\n")
    await user.expect(f"{key} (string, required): ")
    await user.type(f"{key.upper()}\n")


@pytest.mark.parametrize("run", range(3))  # the same order on every run, not by luck once
async def test_one_rounds_questions_come_in_the_servers_order(run):
    user = PtyUser()
    try:
        process = await _interactive(user, "call", STDIO, "three_questions")
        for key in ("zeta", "alpha", "mid"):  # as the server listed them: not sorted
            await _answer(user, key)
        code, out = await _result(process)
        assert code == 0, user.output
        assert json.loads(out)["content"][0]["text"] == "ZETA ALPHA MID"
    finally:
        await user.aclose()


async def test_roots_are_asked_at_the_terminal_as_paths_or_uris(tmp_path):
    user = PtyUser()
    try:
        process = await _interactive(user, "call", STDIO, "where")
        screen = await user.expect("root 1: ", timeout=15)
        assert "The server asks for your roots" in screen
        await user.type(f"{tmp_path}/my project\n")  # a path: made a file:// URI
        screen = await user.expect("root 2: ")
        assert f"= {(tmp_path / 'my project').as_uri()}" in screen
        await user.type("https://example.com/\n")  # not a root: asked again
        screen = await user.expect("root 2: ")
        assert "roots must be file:// URIs" in screen
        await user.type("file:///srv/data\n")
        await user.expect("root 3: ")
        await user.type("\n")  # an empty line ends the list
        code, out = await _result(process)
        assert code == 0, user.output
        uris = json.loads(out)["content"][0]["text"]
        assert uris == f"{(tmp_path / 'my project').as_uri()} file:///srv/data"
    finally:
        await user.aclose()


async def test_no_roots_is_an_answer_too():
    user = PtyUser()
    try:
        process = await _interactive(user, "call", STDIO, "where")
        await user.expect("root 1: ", timeout=15)
        await user.type("\n")
        code, out = await _result(process)
        assert code == 0, user.output
        assert json.loads(out)["content"][0]["text"] == "(no roots)"
    finally:
        await user.aclose()


async def test_a_relative_path_is_made_absolute_from_the_current_folder():
    user = PtyUser()
    try:
        process = await _interactive(user, "call", STDIO, "where")
        await user.expect("root 1: ", timeout=15)
        await user.type("docs\n")
        await user.expect("root 2: ")
        await user.type("\n")
        code, out = await _result(process)
        assert code == 0, user.output
        assert json.loads(out)["content"][0]["text"] == (Path.cwd() / "docs").as_uri()
    finally:
        await user.aclose()


@pytest.mark.parametrize(
    ("args", "question", "field", "typed", "expected"),
    [
        (
            ["get-prompt", STDIO, "briefing", '{"topic": "trains"}'],
            "Who is the briefing for?",
            "audience",
            "ops",
            "Brief ops on trains.",
        ),
        (["read", STDIO, "notes://today"], "Which day?", "day", "Friday", "Notes for Friday"),
    ],
)
async def test_get_prompt_and_read_ask_at_the_terminal(args, question, field, typed, expected):
    user = PtyUser()
    try:
        process = await _interactive(user, *args)
        screen = await user.expect("[a]ccept / [d]ecline / [c]ancel: ", timeout=15)
        assert question in screen
        await user.type("a\n")
        await user.expect(f"{field} (string, required): ")
        await user.type(f"{typed}\n")
        code, out = await _result(process)
        assert code == 0, user.output
        result = json.loads(out)
        text = (
            result["messages"][0]["content"]["text"]
            if "messages" in result
            else result["contents"][0]["text"]
        )
        assert text == expected
    finally:
        await user.aclose()
