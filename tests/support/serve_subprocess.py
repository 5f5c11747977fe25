"""``mrtr serve`` as a real subprocess for a test: started on the test's loop, used once
it says where it listens, stopped as a person stops it (SIGINT).

``async with mrtr_serve(["--app", APP, "--http", "127.0.0.1:0"], log) as url:`` runs
``mrtr serve ...`` with ``tests/`` importable and its stderr in the file ``log`` (a file,
not a pipe: a pipe nobody reads fills and stalls the server; the file is there to read
when a test fails), and yields the URL of its ``listening on URL`` line.  A server that
exits before it listens fails the test with what it said.  The loop of the test
(``sniffio``) is passed on as ``--loop`` unless ``args`` name one, so client and server
run on the same loop.
"""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import sniffio

from support.cli_run import MRTR, TESTS_ON_PATH

#: What ``mrtr serve --http``/``--ws`` says once it accepts connections: its MCP URL.
LISTENING = re.compile(r"listening on ((?:http|ws)://127\.0\.0\.1:\d+/mcp)")
#: Seconds a server may take to listen (a loaded two-core machine is slow to start Python).
START_TIMEOUT = 20.0
#: Seconds it may take to stop after SIGINT before it is killed.
STOP_TIMEOUT = 5.0
#: How often the log is read while waiting for the line.
_LOOK_EVERY = 0.02


@asynccontextmanager
async def mrtr_serve(args: Sequence[str], log: Path) -> AsyncIterator[str]:
    """``mrtr serve ARGS``, once listening: its URL; then SIGINT (a kill past
    :data:`STOP_TIMEOUT`)."""
    loop = [] if "--loop" in args else ["--loop", sniffio.current_async_library()]
    with log.open("wb") as stderr:
        process = await anyio.open_process(
            [*MRTR, "serve", *loop, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=TESTS_ON_PATH,
        )
    try:
        with anyio.fail_after(START_TIMEOUT):
            while (found := LISTENING.search(log.read_text())) is None:
                assert process.returncode is None, log.read_text()
                await anyio.sleep(_LOOK_EVERY)
        yield found.group(1)
    finally:
        with anyio.CancelScope(shield=True):
            process.send_signal(signal.SIGINT)
            with anyio.move_on_after(STOP_TIMEOUT):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
