"""``mrtr serve`` as a real subprocess for a test: started on the test's loop, used once
it says where it listens, stopped as a person stops it (SIGINT).

``async with mrtr_serve(["--app", APP, "--http", "127.0.0.1:0"], log) as url:`` runs
``mrtr serve ...`` with ``tests/`` importable and its stderr in the file ``log`` (a file,
not a pipe: a pipe nobody reads fills and stalls the server; the file is there to read
when a test fails), and yields the URL of its ``listening on URL`` line.  A server that
exits before it listens fails the test with what it said.  The loop of the test
(``sniffio``) is passed on as ``--loop`` unless ``args`` name one, so client and server
run on the same loop.

Where a module's tests can share servers (a server's state outlives no test's
assertions), :class:`SharedServers` (a module-scoped fixture) keeps one ``mrtr serve``
per argument list and loop, started by the first test that asks, stopped at the
module's end: a start is about half a second of CPU, on a machine whose ``make test``
is bound by CPU.
"""

from __future__ import annotations

import re
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
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
async def mrtr_serve(
    args: Sequence[str], log: Path | None = None, *, env: Mapping[str, str] | None = None
) -> AsyncIterator[str]:
    """``mrtr serve ARGS``, once listening: its URL; then SIGINT (a kill past
    :data:`STOP_TIMEOUT`).  Its stderr goes to ``log`` (a temporary file by default);
    ``env``: its environment (by default the tests', ``tests/`` importable)."""
    if log is None:
        with tempfile.TemporaryDirectory(prefix="mrtr-serve-") as folder:
            async with mrtr_serve(args, Path(folder) / "serve.log", env=env) as url:
                yield url
        return
    with log.open("wb") as stderr:
        process = await anyio.open_process(
            _on_this_loop(args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=dict(TESTS_ON_PATH if env is None else env),
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


class SharedServers:
    """``mrtr serve`` subprocesses shared by a module's tests: one per argument list and
    loop, each started by the first test that asks for it and stopped (SIGINT, a kill
    past :data:`STOP_TIMEOUT`) by :meth:`close`.  Their stderr goes to files in
    ``log_dir``."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._urls: dict[tuple[str, ...], str] = {}
        self._processes: list[subprocess.Popen[bytes]] = []

    async def url(self, args: Sequence[str]) -> str:
        """The URL of ``mrtr serve ARGS`` on this test's loop, started if it is not yet."""
        argv = tuple(_on_this_loop(args))
        if argv not in self._urls:
            # (in a thread: the loop under test goes on while the server starts)
            self._urls[argv] = await anyio.to_thread.run_sync(self._start, argv)
        return self._urls[argv]

    def _start(self, argv: tuple[str, ...]) -> str:
        log = self._log_dir / f"serve-{len(self._processes)}.log"
        with log.open("wb") as stderr:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=TESTS_ON_PATH,
            )
        self._processes.append(process)
        deadline = time.monotonic() + START_TIMEOUT
        while (found := LISTENING.search(log.read_text())) is None:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"not listening after {START_TIMEOUT} s"
            time.sleep(_LOOK_EVERY)
        return found.group(1)

    def close(self) -> None:
        for process in self._processes:
            process.send_signal(signal.SIGINT)
        for process in self._processes:
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes.clear()
        self._urls.clear()


def _on_this_loop(args: Sequence[str]) -> list[str]:
    """``mrtr serve ARGS``, with ``--loop`` the test's unless ``args`` name one."""
    loop = [] if "--loop" in args else ["--loop", sniffio.current_async_library()]
    return [*MRTR, "serve", *loop, *args]
