"""A hostile server cannot make ``mrtr call`` show what it likes (issue 22).

``support.hostile_app`` sends window titles, screen clears, clipboard writes,
carriage returns, the 8-bit CSI, hidden text and bidi controls in everything it
can: URL elicitations (message and URL), a form (message, title, description,
enum labels), a tool's text result, a prompt, its listings.  ``mrtr`` runs as a
subprocess with a real pseudo-terminal (output processing off, so a CR on the
screen is one the command wrote); the bytes it writes to stdout and stderr hold
none of those characters, and the consent line shows exactly the URL offered.
"""

from __future__ import annotations

import json
import subprocess
import termios

import pytest
import trio
from mrtr_transports.cli.terminal_text import BIDI_CONTROLS
from support.cli_pty import PtyUser
from support.cli_run import MRTR, TESTS_ON_PATH, mrtr
from support.hostile_app import HOSTILE, STDIO_TARGET, URLS

pytestmark = pytest.mark.subprocess

#: What must never reach the terminal from the server.
FORBIDDEN = {"\x1b", "\r", "\x9b", "\x07", "\u2028", "\u2029", *BIDI_CONTROLS}


def assert_inert(text: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in text if c in FORBIDDEN})
    assert not found, f"{found} reached the terminal:\n{text!r}"


def raw_output(user: PtyUser) -> PtyUser:
    """The terminal writes what the program wrote (no NL -> CR NL translation)."""
    attrs = termios.tcgetattr(user.slave_fd)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(user.slave_fd, termios.TCSANOW, attrs)
    return user


async def run_on_terminal(user: PtyUser, *args: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [*MRTR, *args],
        stdin=user.slave_fd,
        stdout=subprocess.PIPE,
        stderr=user.slave_fd,
        env=TESTS_ON_PATH,
    )


async def finish(process: trio.Process, user: PtyUser) -> tuple[int, str]:
    assert process.stdout is not None
    chunks = []
    with trio.fail_after(30):
        while chunk := await process.stdout.receive_some():
            chunks.append(chunk)
        code = await process.wait()
    await user.drain(0.2)
    return code, b"".join(chunks).decode()


async def test_url_elicitations_cannot_spoof_the_consent_screen():
    user = raw_output(PtyUser())
    try:
        process = await run_on_terminal(user, "call", STDIO_TARGET, "visit")
        for key in ("plain", "loopback", "fine"):  # the URLs that may be offered, in order
            screen = await user.expect("Open it? [y]es / [d]ecline / [c]ancel: ", timeout=30)
            assert_inert(screen)
            lines = screen.splitlines()
            # The consent line shows the exact URL that would be opened, whole and plain.
            url_lines = [line for line in lines if line.startswith("  URL:")]
            assert url_lines == [f"  URL:  {URLS[key]}"], screen  # and no other
            host_line = next(line for line in lines if line.startswith("  host: "))
            assert ("(not https)" in host_line) is (key == "plain"), host_line
            await user.type("d\n")
        code, out = await finish(process, user)
    finally:
        await user.aclose()
    assert code == 0, user.output
    assert_inert(user.output)
    assert_inert(out)
    assert json.loads(out)["content"][0]["text"] == " ".join(f"{key}=decline" for key in URLS)
    screen = user.output
    for key in ("spoofed", "script", "data", "file", "credentials"):  # declined, never offered
        assert f"  URL:  {URLS[key]}" not in screen.splitlines()
    assert screen.count("Declined: mrtr will not offer this URL") == 5
    assert "javascript: URLs are refused (only http and https)" in screen
    assert "data: URLs are refused" in screen and "file: URLs are refused" in screen
    assert "it carries credentials (user:pass@ before the host)" in screen
    assert "it holds a hidden or control character (U+001B)" in screen
    assert "\\x1b[2J" in screen and "\\u202e" in screen  # shown escaped: something was there


async def test_a_url_consented_in_advance_is_still_shown_safely_and_checked():
    ran = await mrtr(
        "call", "--answer", 'elicitation/create#url="accept"', STDIO_TARGET, "visit",
        env=TESTS_ON_PATH,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert_inert(ran.stderr)
    assert_inert(ran.stdout)
    accepted = {"plain", "loopback", "fine"}
    assert ran.json()["content"][0]["text"] == " ".join(
        f"{key}={'accept' if key in accepted else 'decline'}" for key in URLS
    )
    lines = ran.stderr.splitlines()
    for key in accepted:
        assert f"  URL:  {URLS[key]}" in lines
    assert ran.stderr.count("Declined: mrtr will not offer this URL") == 5


async def test_a_hostile_form_is_shown_escaped():
    user = raw_output(PtyUser())
    try:
        process = await run_on_terminal(user, "call", STDIO_TARGET, "form")
        screen = await user.expect("[a]ccept / [d]ecline / [c]ancel: ", timeout=30)
        assert "Pick one title\\x1b]0;pwned\\x07 clear\\x1b[2J" in screen
        await user.type("a\n")
        screen = await user.expect("(string, required): ")
        assert "About it title\\x1b]0;pwned" in screen  # the description
        assert "1) first title\\x1b]0;pwned" in screen and "2) second title" in screen
        assert "Choice title\\x1b]0;pwned" in screen  # the title, in the prompt
        await user.type("2\n")
        code, out = await finish(process, user)
    finally:
        await user.aclose()
    assert code == 0, user.output
    assert_inert(user.output)
    assert_inert(out)
    # JSON output: the same text, every such character escaped (\u001b, \u202e, ...).
    assert json.loads(out)["content"][0]["text"] == f"picked b {HOSTILE}"
    assert "\\u202e" in out and "\\u009b" in out and "\\u001b" in out


async def test_tool_text_prompts_and_listings_print_inert():
    text, prompt, tools, prompts, listed_json = [
        await mrtr(*args, env=TESTS_ON_PATH)
        for args in (
            ("call", STDIO_TARGET, "text"),
            ("get-prompt", STDIO_TARGET, "hostile", json.dumps({"topic": f"x{HOSTILE}"})),
            ("list", STDIO_TARGET, "tools"),
            ("list", STDIO_TARGET, "prompts"),
            ("list", "--json", STDIO_TARGET, "tools"),
        )
    ]
    for ran in (text, prompt, tools, prompts, listed_json):
        assert ran.returncode == 0, ran.stderr
        assert_inert(ran.stdout)
        assert_inert(ran.stderr)
    assert text.json()["content"][0]["text"] == f"result {HOSTILE}"
    [message] = prompt.json()["messages"]
    assert message["content"]["text"] == f"Talk about x{HOSTILE} {HOSTILE}"  # the same text
    assert "Hostile text title\\x1b]0;pwned" in tools.stdout
    assert "What title\\x1b]0;pwned" in prompts.stdout
    assert {t["name"] for t in listed_json.json()["tools"]} == {"visit", "form", "text"}


async def test_a_hostile_error_is_shown_escaped():
    ran = await mrtr("call", STDIO_TARGET, f"no such tool {HOSTILE}", env=TESTS_ON_PATH)
    assert ran.returncode == 3, ran.stderr
    assert_inert(ran.stderr)
    assert "\\x1b]0;pwned" in ran.stderr
