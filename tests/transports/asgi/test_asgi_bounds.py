"""The connection-level bounds in front of ``McpAsgi``, measured on the real servers with
the probes (``support.asgi_probes``), as docs/asgi.md's table states them: what the
endpoint itself refuses wherever it runs (a head over ``max_header_size``, with more
than 256 fields or a field over 8 KiB: 431; a body over ``max_body_size``: 413, past
``body_timeout``: 408; JSON nested too deep: -32700), and the server settings that
bound the rest (hypercorn's ``--keep-alive`` ends a trickled or silent head, and so
does uvicorn with ``--http ...HeadDeadlineH11Protocol``; uvicorn's
``--limit-concurrency`` caps connections, with 503)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path

import pytest
from mrtr_transports.asgi.uvicorn_protocol import with_head_timeout
from mrtr_transports.host.bounds import MAX_FIELD_SIZE, MAX_HEADER_FIELDS
from support.asgi_apps import MAX_BODY
from support.asgi_probes import (
    Outcome,
    big_header,
    idle_connections,
    many_headers,
    trickle,
    trickle_body,
)
from support.asgi_servers import SERVERS, post, serving
from support.raw_http import tool_call

pytestmark = pytest.mark.subprocess

KIB = 1024


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_a_big_head_is_431_under_every_server(server: str, tmp_path: Path) -> None:
    # uvicorn lets both through (a head that arrives whole escapes h11's incomplete-event
    # bound); hypercorn stops the 70 KiB one itself: the endpoint answers the rest alike.
    with serving(server, "support.asgi_apps:bare", tmp_path / "log") as base:
        assert big_header(base, 10).status == 200
        assert big_header(base, 20 * KIB).status == 431
        assert big_header(base, 70 * KIB).status == 431


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_too_many_header_fields_or_one_too_long_are_431_under_every_server(
    server: str, tmp_path: Path
) -> None:
    # Heads under max_header_size that neither server refuses by itself: the endpoint
    # holds the host's rule (host.bounds.head_refusal), with the host's status.
    with serving(server, "support.asgi_apps:bare", tmp_path / "log") as base:
        assert many_headers(base, MAX_HEADER_FIELDS).status == 200
        assert many_headers(base, MAX_HEADER_FIELDS + 1).status == 431
        assert many_headers(base, 1000).status == 431
        assert big_header(base, MAX_FIELD_SIZE - 20).status == 200
        assert big_header(base, MAX_FIELD_SIZE).status == 431


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_body_size_and_the_json_depth_are_bounded_alike_under_every_server(
    server: str, tmp_path: Path
) -> None:
    # What the endpoint reads itself, with the statuses of mrtr serve --http (the
    # body: 413 past max_body_size, 64 KiB for `bare`; the depth: -32700 past 128).
    message = tool_call("greet", {"name": "Ada"})
    deep = json.dumps({**message, "x": []}).replace("[]", "[" * 200 + "]" * 200)
    large = json.dumps({**message, "pad": "a" * MAX_BODY}).encode()
    with serving(server, "support.asgi_apps:bare", tmp_path / "log") as base:
        status, _, body = post(base, message, body=large)
        assert status == 413 and b"body larger than" in body
        status, _, body = post(base, message, body=deep.encode())
        assert status == 400 and json.loads(body)["error"]["code"] == -32700
        assert post(base, message)[0] == 200


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_a_trickled_body_is_408_at_the_body_deadline(server: str, tmp_path: Path) -> None:
    # Neither server bounds a body sent a byte a second (a read timeout is reset by each
    # byte): the endpoint's body_timeout (2 s here) is a deadline.
    with serving(server, "support.asgi_apps:strict", tmp_path / "log") as base:
        trickled = trickle_body(base, give_up=10)
        assert trickled.status == 408, trickled
        assert trickled.closed_after is not None and trickled.closed_after < 4


def test_hypercorn_keep_alive_ends_a_trickled_and_a_silent_head(tmp_path: Path) -> None:
    log, options = tmp_path / "log", ["--keep-alive", "2"]
    with serving("hypercorn-trio", "support.asgi_apps:bare", log, options=options) as base:
        trickled = trickle(base, give_up=10)
        assert trickled.closed_after is not None and trickled.closed_after < 4, trickled
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
            started = time.monotonic()
            assert silent.recv(100) == b""  # closed, with nothing said
            assert time.monotonic() - started < 4


def test_uvicorn_keeps_a_trickled_head_and_the_head_deadline_protocol_ends_it(
    tmp_path: Path,
) -> None:
    # uvicorn has no head deadline (--timeout-keep-alive starts after a response, and
    # each byte resets it); HeadDeadlineH11Protocol (--http) is the host's rule.
    log = tmp_path / "log"
    with serving(
        "uvicorn", "support.asgi_apps:bare", log, options=["--timeout-keep-alive", "1"]
    ) as base:
        assert trickle(base, give_up=5) == Outcome(None, None)  # still open after 5 s
    options = ["--http", "support.asgi_apps:head_2s"]
    with serving("uvicorn", "support.asgi_apps:bare", log, options=options) as base:
        trickled = trickle(base, give_up=10)
        assert trickled.status == 408, trickled
        assert trickled.closed_after is not None and trickled.closed_after < 4, trickled
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
            started = time.monotonic()
            assert silent.recv(100) == b""  # closed, with nothing said
            assert 1 < time.monotonic() - started < 4
        # Requests are served as before, on one kept-alive connection too.
        assert big_header(base, 10).status == 200
        status, _, body = post(base, tool_call("greet", {"name": "Ada"}))
        assert status == 200 and b"hello, Ada" in body
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            for _ in range(2):
                conn.request("GET", "/healthz")
                assert conn.getresponse().read() == b'{"status":"ok"}'
                time.sleep(1.0)  # each next head has its own 2 s
        finally:
            conn.close()
    with pytest.raises(ValueError, match="head_timeout"):
        with_head_timeout(0)


def test_uvicorn_limit_concurrency_caps_connections_with_503(tmp_path: Path) -> None:
    options = ["--limit-concurrency", "4"]
    with serving("uvicorn", "support.asgi_apps:bare", tmp_path / "log", options=options) as base:
        assert big_header(base, 10).status == 200
        (past_the_cap,) = idle_connections(base, 6)  # six silent connections hold it
        assert past_the_cap.status == 503
