"""Servers in subprocesses for the load and fault tests, and what they weigh (VmRSS).

* :func:`http_server`: ``python -m support.load_server --http 127.0.0.1:PORT``
  with the bounds given; yields a :class:`ServerProcess` whose ``url`` is the
  endpoint, once it listens.
* :data:`STDIO_SERVER`: the serve entry's command line for ``support.load_app``
  over stdio (for ``open_stdio_client`` or a raw pipe), with :func:`server_env`.
* :func:`rss_kib`: a process's resident set from ``/proc`` (Linux);
  :class:`RssSampler` keeps the peak while something runs.

Everything listens on 127.0.0.1 only.  A server's stderr is read all along (a
full pipe would stall it) and its last lines kept for failure messages.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from subprocess import DEVNULL, PIPE

import trio

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
APP = "support.load_app:app"
STDIO_SERVER = [sys.executable, "-m", "mrtr_transports", "serve", "--stdio", "--app", APP]
#: Seconds a server may take to say it listens (a loaded machine imports slowly).
START_TIMEOUT = 60.0


def server_env(state_key: bytes | None = None) -> dict[str, str]:
    """What a server subprocess needs on top of the inherited environment: ``tests/``
    importable, and the app's state key when given."""
    paths = [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {"PYTHONPATH": os.pathsep.join(paths)}
    if state_key is not None:
        env["MRTR_LOAD_STATE_KEY"] = state_key.hex()
    return env


def rss_kib(pid: int) -> int:
    """The resident set of process ``pid`` in KiB (``VmRSS`` of ``/proc/PID/status``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


class RssSampler:
    """The peak resident set of a process, sampled every ``interval`` seconds while
    :meth:`run` runs (and once more when asked)."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0

    def sample(self) -> int:
        value = rss_kib(self.pid)
        self.peak_kib = max(self.peak_kib, value)
        return value

    async def run(self) -> None:
        while True:
            self.sample()
            await trio.sleep(self.interval)


class ServerProcess:
    """A server subprocess: its process, its endpoint (HTTP) and its stderr tail."""

    def __init__(self, process: trio.Process, url: str | None = None) -> None:
        self.process = process
        self.url = url
        self.stderr_tail: deque[str] = deque(maxlen=50)
        self.listening = trio.Event()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        assert self.url is not None
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def kill(self) -> None:
        """SIGKILL: the process ends at once, nothing of it is flushed or closed cleanly."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)

    def stderr_text(self) -> str:
        return "".join(self.stderr_tail)


async def _read_stderr(stream: trio.abc.ReceiveStream, server: ServerProcess) -> None:
    """Every line of the server's stderr, kept in its tail; ``server.listening`` is set at
    the line that announces the endpoint (and at the end of stderr, with no ``url``)."""
    buffer = b""
    while data := await stream.receive_some(65536):
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            text = line.decode(errors="replace")
            server.stderr_tail.append(text + "\n")
            if "listening on " in text and server.url is None:
                server.url = text.split("listening on ", 1)[1].strip()
                server.listening.set()
    server.listening.set()


@asynccontextmanager
async def http_server(
    *,
    port: int = 0,
    state_key: bytes | None = None,
    app: str = APP,
    loop: str = "trio",
    **bounds: float,
) -> AsyncIterator[ServerProcess]:
    """``support.load_server`` on ``127.0.0.1:port`` with these ``HttpServer`` bounds
    (``max_connections=8``, ``idle_timeout=2.0``, ...; one this checkout's server does
    not have is left out), on ``loop`` (``trio``, ``asyncio``), until the block ends (then
    SIGTERM, SIGKILL if it lingers)."""
    argv = [sys.executable, "-m", "support.load_server", "--http", f"127.0.0.1:{port}"]
    argv += ["--app", app, "--loop", loop]
    for name, value in bounds.items():
        argv += ["--set", f"{name}={value}"]
    env = {**os.environ, **server_env(state_key)}
    process = await trio.lowlevel.open_process(
        argv, stdin=DEVNULL, stdout=DEVNULL, stderr=PIPE, env=env, cwd=ROOT
    )
    server = ServerProcess(process)
    assert process.stderr is not None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_stderr, process.stderr, server)
            with trio.move_on_after(START_TIMEOUT):
                await server.listening.wait()
            if server.url is None:
                raise RuntimeError(f"the HTTP server did not start: {server.stderr_text()}")
            try:
                yield server
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await _stop(process)


async def _stop(process: trio.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(5):
            await process.wait()
    if process.returncode is None:
        process.send_signal(signal.SIGKILL)
        await process.wait()
