"""Real ASGI servers as subprocesses on 127.0.0.1: uvicorn (asyncio) and hypercorn's trio
worker, each serving an ASGI application named ``module:attribute`` (``tests/`` on the
path); ``serving`` yields the base URL (``http://127.0.0.1:PORT``) once it listens."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
def serving(server: str, target: str, log_path: Path) -> Iterator[str]:
    """``server`` (a key of ``SERVERS``) serving ``target``; its base URL.  Its stderr
    goes to ``log_path`` (a file, never a pipe nobody drains)."""
    args, listening = SERVERS[server]
    env = {
        **os.environ,
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
