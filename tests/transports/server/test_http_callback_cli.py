"""``mrtr call`` through a URL elicitation with a callback, the test as the browser.

A real ``mrtr serve --http`` and a real ``mrtr call`` (subprocesses): on a
terminal (a pseudo-terminal the test types into) the URL is shown whole before
consent is asked; with an answers file that consents in advance it is shown
too.  Either way the call then waits for the server, which hears from the
browser (the test following the provider's redirect to the callback).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import trio
from support.cli_pty import PtyUser
from support.cli_run import MRTR
from support.url_browser import browse, callback_of, mrtr_serve_http

pytestmark = pytest.mark.subprocess

URL_LINE = re.compile(r"URL:  (https://provider\.example/\S+)")


async def _stdout_of(process: trio.Process, timeout: float = 20.0) -> tuple[int, str]:
    assert process.stdout is not None
    chunks = []
    with trio.fail_after(timeout):
        while chunk := await process.stdout.receive_some():
            chunks.append(chunk)
        code = await process.wait()
    return code, b"".join(chunks).decode()


async def test_on_a_terminal_the_url_is_shown_then_consent_then_the_server_finishes() -> None:
    user = PtyUser()
    try:
        async with mrtr_serve_http() as target:
            process = await trio.lowlevel.open_process(
                [*MRTR, "call", target, "connect_provider"],
                stdin=user.slave_fd,
                stdout=subprocess.PIPE,
                stderr=user.slave_fd,
            )
            screen = await user.expect("Open it? [y]es / [d]ecline / [c]ancel: ", timeout=20)
            found = URL_LINE.search(screen)
            assert found, screen
            assert screen.index("URL:") < screen.index("Open it?")  # shown before consent
            await user.type("y\n")
            await user.expect("Waiting for the server to hear back from your browser")
            await trio.sleep(1.5)  # the person is in the browser: the call polls meanwhile
            page = await browse(callback_of(found.group(1), code="code-ABCD"))
            assert page.status == 200
            code, out = await _stdout_of(process)
        assert code == 0, out
        assert "'ABCD'" in json.loads(out)["content"][0]["text"]
    finally:
        await user.aclose()


async def test_an_answers_file_consents_in_advance_and_the_url_is_still_shown(
    tmp_path: Path,
) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"elicitation/create#url": "accept"}))
    async with mrtr_serve_http() as target:
        process = await trio.lowlevel.open_process(
            [*MRTR, "call", "--answers", str(answers), target, "connect_provider"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stderr is not None
        said = ""
        with trio.fail_after(20):
            while not (found := URL_LINE.search(said)):
                chunk = await process.stderr.receive_some()
                assert chunk, said
                said += chunk.decode()
        page = await browse(callback_of(found.group(1), error="access_denied"))
        assert page.status == 200
        code, out = await _stdout_of(process)
    assert code == 1, out  # a tool error: the sign-in was declined
    assert "declined at the provider" in json.loads(out)["content"][0]["text"]


async def test_url_wait_timeout_ends_a_wait_the_person_never_finishes(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"elicitation/create#url": "accept"}))
    async with mrtr_serve_http() as target:
        argv = [*MRTR, "call", "--answers", str(answers), "--url-wait-timeout", "1"]
        process = await trio.lowlevel.open_process(
            [*argv, target, "connect_provider"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        code, out = await _stdout_of(process, timeout=30)
    assert code == 4, out  # a time limit ran out (the browser never came back)
