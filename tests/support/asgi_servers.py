"""Real ASGI servers as subprocesses on 127.0.0.1: uvicorn (asyncio) and hypercorn's trio
worker, each serving an ASGI application named ``module:attribute`` (``tests/`` on the
path); ``serving`` yields the base URL (``http://127.0.0.1:PORT``) once it listens.
``post`` sends one request on a connection of its own (``http.client``)."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import mrtr_core as m
from support.raw_http import ACCEPT_BOTH

#: The ``_meta`` every 2026-07-28 request carries.
META = {m.wire.META_PROTOCOL_VERSION: "2026-07-28", m.wire.META_CLIENT_CAPABILITIES: {}}

TESTS = Path(__file__).resolve().parents[1]
#: The servers, by the name the tests are parametrized with: (command, "listening" line).
SERVERS: dict[str, tuple[list[str], re.Pattern[str]]] = {
    "uvicorn": (
        ["-m", "uvicorn", "--host", "127.0.0.1", "--port", "0", "--log-level", "info"],
        re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)"),
    ),
    "hypercorn-trio": (
        ["-m", "hypercorn", "--worker-class", "trio", "--bind", "127.0.0.1:0"],
        re.compile(r"Running on (http://127\.0\.0\.1:\d+)"),
    ),
}


@contextmanager
def serving(
    server: str,
    target: str,
    log_path: Path,
    *,
    factory: bool = False,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> Iterator[str]:
    """``server`` (a key of ``SERVERS``) serving ``target``; its base URL.  Its stderr
    goes to ``log_path`` (a file, never a pipe nobody drains).  ``factory``: ``target``
    names a function that makes the app (uvicorn's ``--factory``); ``env``: more variables;
    ``options``: more command-line options of the server."""
    args, listening = SERVERS[server]
    args = [*args, *options]
    if factory:
        args = [*args, "--factory"]
    env = {
        **os.environ,
        **(env or {}),
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
    }
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, *args, target],
            cwd=TESTS,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 30
        while not (found := listening.search(log_path.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{server} did not start (exit {process.poll()}):\n{log_path.read_text()}"
                )
            time.sleep(0.05)
        yield found.group(1)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def post(
    base: str,
    message: Mapping[str, Any] | None,
    *,
    accept: str = ACCEPT_BOTH,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    method: str = "POST",
    path: str = "/mcp",
) -> tuple[int, dict[str, str], bytes]:
    """One request on a connection of its own: status, headers (lower-case), body."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    sent: dict[str, str] = {"Accept": accept, "Content-Type": "application/json"}
    if message is not None:
        sent.update(m.http.request_headers(message))
        body = json.dumps(message).encode() if body is None else body
    sent.update(headers or {})
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        conn.close()


def text_of(result: Mapping[str, Any]) -> str:
    return str(result["content"][0]["text"])


def error_of(body: bytes) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(body)["error"]
    return error
