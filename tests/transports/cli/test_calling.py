"""The client commands as a person uses them: real ``mrtr serve`` over stdio, HTTP and WebSocket.

Progress and log lines on stderr (and ``--quiet``), ``--header`` on the wire
and its checks, ``mrtr get-prompt`` and ``mrtr read`` through their input
rounds, ``mrtr list`` (readable and ``--json``), ``mrtr --version``, and an
HTTP or WebSocket refusal's status and body shown on one safe line.  The
terminal prompts (the questions' order, roots) are in ``test_calling_pty.py``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version

import pytest
import trio
from support.calling_app import STDIO_TARGET
from support.cli_run import mrtr, mrtr_all
from support.serve_subprocess import mrtr_serve

pytestmark = pytest.mark.subprocess

APP = "support.calling_app:app"
STDIO = STDIO_TARGET
BUSY_LINES = [
    "progress 1/3 (33%): step 1",
    "progress 2/3 (67%): step 2",
    "progress 3/3 (100%): step 3",
    'log info [busy]: {"stage": "middle"}',
    # The server's escape sequences and newline never reach the terminal as such.
    "log warning [busy]: red \\x1b[31malert\\x1b[0m second line",  # (escaped: issue 22)
]


@asynccontextmanager
async def serving(transport: str) -> AsyncIterator[str]:
    """``mrtr serve --http|--ws 127.0.0.1:0`` of the calling app; its URL."""
    async with mrtr_serve([f"--{transport}", "127.0.0.1:0", "--app", APP]) as url:
        yield url


@pytest.fixture
async def http_url() -> AsyncIterator[str]:
    async with serving("http") as url:
        yield url


@pytest.fixture
async def ws_url() -> AsyncIterator[str]:
    async with serving("ws") as url:
        yield url


# --- Progress and log lines ---------------------------------------------------------------


async def test_progress_and_log_lines_on_stderr_over_every_transport(http_url, ws_url):
    token = ["--header", "Authorization: Bearer t0ken"]  # (a real server takes it in stride)
    runs = await mrtr_all(
        [
            ["call", STDIO, "busy"],
            ["call", *token, http_url, "busy"],
            ["call", *token, ws_url, "busy"],
        ],
        timeout=30,
    )
    for target, ran in zip((STDIO, http_url, ws_url), runs, strict=True):
        assert ran.returncode == 0, (target, ran.stderr)
        assert ran.json()["content"][0]["text"] == "busy done"  # stdout: the result only
        assert ran.stderr.splitlines() == BUSY_LINES, target


async def test_quiet_asks_for_none_and_log_level_picks_the_least_severe(http_url):
    quiet, warnings, debug, legacy, legacy_quiet = await mrtr_all(
        [
            ["call", "--quiet", http_url, "busy"],
            ["call", "--log-level", "warning", http_url, "busy"],
            ["call", "--log-level", "debug", "--era", "modern", STDIO, "busy"],
            # A 2025 session: the server sends every level, the command shows from info up.
            ["call", "--era", "legacy", STDIO, "busy"],
            ["call", "--era", "legacy", "--quiet", STDIO, "busy"],
        ],
        timeout=30,
    )
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert quiet.json()["content"][0]["text"] == "busy done"
    assert warnings.stderr.splitlines() == [*BUSY_LINES[:3], BUSY_LINES[4]]
    fine = "log debug [busy]: fine detail"
    assert debug.stderr.splitlines() == [*BUSY_LINES[:3], fine, *BUSY_LINES[3:]]
    assert legacy.returncode == 0 and legacy.stderr.splitlines() == BUSY_LINES
    assert legacy_quiet.returncode == 0 and legacy_quiet.stderr == ""


# --- get-prompt and read, through their rounds -------------------------------------------------


async def test_get_prompt_and_read_answer_every_round(http_url):
    audience = 'audience={"action": "accept", "content": {"audience": "the night shift"}}'
    day = 'day={"action": "accept", "content": {"day": "Monday"}}'
    prompt, resource, prompt_stdio, unanswered = await mrtr_all(
        [
            ["get-prompt", "--answer", audience, http_url, "briefing", '{"topic": "trains"}'],
            ["read", "--answer", day, http_url, "notes://today"],
            ["get-prompt", "--answer", audience, STDIO, "briefing", '{"topic": "buses"}'],
            ["read", http_url, "notes://today"],
        ],
        timeout=30,
    )
    assert prompt.returncode == 0, prompt.stderr
    text = prompt.json()["messages"][0]["content"]["text"]
    assert text == "Brief the night shift on trains."
    assert resource.returncode == 0, resource.stderr
    assert resource.json()["contents"][0]["text"] == "Notes for Monday"
    assert (
        prompt_stdio.json()["messages"][0]["content"]["text"] == "Brief the night shift on buses."
    )
    assert unanswered.returncode == 7 and "answer" in unanswered.stderr  # no answer, no terminal


async def test_prompt_arguments_are_strings():
    ran = await mrtr("get-prompt", STDIO, "briefing", '{"topic": 3}')
    assert ran.returncode == 2
    assert "prompt arguments are strings; topic is not" in ran.stderr


# --- mrtr list ------------------------------------------------------------------------------------


async def test_list_shows_each_tool_with_its_arguments(http_url):
    tools, as_json, prompts, resources = await mrtr_all(
        [
            ["list", http_url],
            ["list", "--json", http_url, "tools"],
            ["list", STDIO, "prompts"],
            ["list", http_url, "resources"],
        ],
        timeout=30,
    )
    assert tools.returncode == 0, tools.stderr
    lines = tools.stdout.splitlines()
    at = lines.index("plan  Plans a trip.")
    assert lines[at + 1 : at + 4] == [
        "    city  string, required  Where to go",
        "    days  integer, default 2",
        '    mode  one of "train", "bus"',
    ]
    assert "busy  Reports progress 1..3 of 3 and logs at debug, info and warning." in lines
    listed = json.loads(as_json.stdout)["tools"]
    assert [t["name"] for t in listed] == ["busy", "three_questions", "where", "plan"]
    assert listed[3]["inputSchema"]["required"] == ["city"]
    assert prompts.stdout.splitlines() == [
        "briefing  A briefing prompt: asks who it is for first.",
        "    topic  string, required  What about",
    ]
    assert resources.stdout.splitlines() == [
        "notes://today  Today's notes: asks which day first.",
        "    name today, text/plain",
    ]


async def test_list_of_nothing_says_so_and_a_bad_target_is_usage():
    templates, bad = await mrtr_all([["list", STDIO, "templates"], ["list", "nowhere"]])
    assert templates.returncode == 0 and templates.stdout == "(no templates)\n"
    assert bad.returncode == 2 and "TARGET 'nowhere'" in bad.stderr


# --- --version ------------------------------------------------------------------------------------


async def test_version_names_the_package_and_the_protocol_revision():
    ran = await mrtr("--version")
    assert ran.returncode == 0
    assert ran.stdout.splitlines() == [
        f"mrtr {version('mrtr')} (MCP protocol 2026-07-28; "
        "2025 sessions: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)"
    ]


# --- --header, and what a refusal says ------------------------------------------------------------


@asynccontextmanager
async def refusing(status: str, content_type: str, body: bytes) -> AsyncIterator[tuple[int, list]]:
    """A server on 127.0.0.1 that reads each request's head, keeps it, and refuses it."""
    heads: list[bytes] = []

    async def handle(stream: trio.SocketStream) -> None:
        head = b""
        with trio.move_on_after(5):
            while b"\r\n\r\n" not in head:
                chunk = await stream.receive_some()
                if not chunk:
                    break
                head += chunk
        heads.append(head)
        reply = (
            f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode() + body
        await stream.send_all(reply)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        yield listeners[0].socket.getsockname()[1], heads
        nursery.cancel_scope.cancel()


PAGE = (
    b"<html><head><title>Not here</title></head>\n<body><h1>\x1b[2JNo such page</h1></body></html>"
)


async def test_headers_go_on_the_wire_and_an_error_page_is_shown_on_one_safe_line():
    async with refusing("404 Not Found", "text/html", PAGE) as (port, heads):
        ran = await mrtr(
            "call",
            "--header",
            "Authorization: Bearer s3cret",
            "--header",
            "X-Tenant:blue",
            f"http://127.0.0.1:{port}/mcp",
            "anything",
        )
    assert ran.returncode == 6, ran.stderr
    assert ran.stderr.splitlines() == [
        f"mrtr call: transport failure: http://127.0.0.1:{port}/mcp answered initialize "
        "with HTTP 404 Not Found: Not here No such page"
    ]
    assert heads and all(
        b"\r\nAuthorization: Bearer s3cret\r\n" in head and b"\r\nX-Tenant: blue\r\n" in head
        for head in heads
    ), heads


async def test_a_websocket_refusal_shows_its_status_and_body_and_got_the_headers():
    async with refusing("401 Unauthorized", "text/plain", b"token\r\nexpired\x07") as (port, heads):
        ran = await mrtr(
            "call", "--header", "Authorization: Bearer old", f"ws://127.0.0.1:{port}/mcp", "x"
        )
    assert ran.returncode == 6, ran.stderr
    assert ran.stderr.splitlines() == [
        f"mrtr call: transport failure: ws://127.0.0.1:{port}/mcp: the server refused the "
        "WebSocket (HTTP 401): token expired"
    ]
    assert b"\r\nAuthorization: Bearer old\r\n" in heads[0]


async def test_the_servers_helpful_404_names_the_right_path(http_url):
    wrong = http_url.replace("/mcp", "/wrong")
    auto, modern = await mrtr_all(
        [["call", wrong, "busy"], ["call", "--era", "modern", wrong, "busy"]], timeout=30
    )
    for ran in (auto, modern):
        assert ran.returncode == 3, ran.stderr
        assert "no MCP endpoint at '/wrong': use '/mcp'" in ran.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("Authorization Bearer x", "expected NAME:VALUE"),
        ("X-A: b\rc", "no CR, LF or other control characters"),
        ("X-A: b\nX-B: c", "no CR, LF or other control characters"),
        ("X A: b", "a header name is letters"),
        ("X-A: " + "v" * 9000, "longer than 8192"),
        ("Mcp-Method: tools/list", "the client sets this header itself"),
        ("mcp-param-region: eu", "the client sets this header itself"),
        ("Content-Type: text/plain", "the client sets this header itself"),
    ],
)
async def test_a_bad_header_is_a_usage_error_before_anything_is_sent(header, says):
    ran = await mrtr("call", "--header", header, "http://127.0.0.1:9/mcp", "x")
    assert ran.returncode == 2
    assert says in ran.stderr


async def test_a_stdio_target_takes_no_headers():
    ran = await mrtr("call", "--header", "A: b", STDIO, "busy")
    assert ran.returncode == 2
    assert "a stdio TARGET has no headers" in ran.stderr
