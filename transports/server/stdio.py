"""Serve a ``ServerApp`` on stdin/stdout: the MCP stdio transport, server side.

The model: the client starts us as a child process and writes one JSON-RPC
message per line to our stdin; we write one per line to our stdout, and
nothing else may ever reach stdout.  :func:`guard_stdout` moves the real
stdout out of everyone's way: it keeps a private duplicate of file descriptor
1 for the protocol, points fd 1 itself at stderr (so even a C extension or a
child process that writes to fd 1 lands on stderr) and sets ``sys.stdout`` to
``sys.stderr`` (so ``print`` does too).  The serve entry
(:mod:`~mrtr_transports.cli.serve`) takes the guard *before* it imports the
app, so a ``print`` at import time is as harmless as one in a handler;
``serve_stdio`` takes it (or uses the one already taken) while serving.
Logging goes to stderr, which the client must not treat as an error.

Everything else is the shared driver (``driver.serve_stream``): one task per
request, ``notifications/cancelled`` cancels that handler and nothing is sent
for it, 2025-era clients (``initialize``) are served through the legacy shim,
and at the end of stdin the server exits: open ``subscriptions/listen``
streams end first with their final result (when the app has
``close_subscriptions()``, as ``McpApp`` does), running handlers get
``drain_timeout`` seconds (1 s) to finish, then are cancelled.  A client that
stops reading stdout gets backpressure, not a growing server: a request holds
its slot until its answer is handed to the writer, and with all
``max_incoming`` (1024) slots taken the server stops reading stdin until the
client reads again.

It runs on whichever loop hosts it: ``anyio.run(serve_stdio, app)`` serves on
asyncio (an ``async def`` tool may await asyncio-only libraries), and
``anyio.run(serve_stdio, app, backend="trio")`` or ``trio.run`` on trio.  The
pipes are :class:`~mrtr_transports.server.fdstream.FdStream`: non-blocking
descriptors the loop watches, on both loops, no thread per read.

Run it (both go through :mod:`~mrtr_transports.cli.serve`)::

    mrtr serve --stdio --app mypackage.server:app
    python -m mrtr_transports serve --stdio --app mypackage.server:app
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any, Protocol

import anyio
import anyio.abc

from .app import ServerApp
from .driver import DEFAULT_DRAIN_TIMEOUT, serve_stream
from .fdstream import FdStream

__all__ = ["Stop", "guard_stdout", "serve_stdio"]


class Stop(Protocol):
    """What ``serve_stdio(stop=...)`` waits on: an ``anyio.Event`` (or a ``trio.Event``)."""

    async def wait(self) -> Any: ...


#: The protocol's duplicate of the real stdout while a guard is taken.
_protocol_fd: int | None = None


@contextmanager
def guard_stdout() -> Iterator[int]:
    """Keep stdout for the protocol: yields a private duplicate of fd 1 (the real stdout).

    Until the block ends, fd 1 and ``sys.stdout`` point at stderr, so nothing
    else written to "stdout" (``print``, a C library, a child process) reaches
    the protocol stream; then both are restored and the duplicate is closed.
    Nested guards share the outer one's duplicate.
    """
    global _protocol_fd
    if _protocol_fd is not None:
        yield _protocol_fd
        return
    sys.stdout.flush()
    saved_stdout = sys.stdout
    protocol_fd = os.dup(1)
    saved_fd1 = os.dup(1)
    os.dup2(2, 1)  # from now on whatever writes to fd 1 writes to stderr
    sys.stdout = sys.stderr
    _protocol_fd = protocol_fd
    try:
        yield protocol_fd
    finally:
        _protocol_fd = None
        sys.stdout.flush()
        os.dup2(saved_fd1, 1)
        os.close(saved_fd1)
        os.close(protocol_fd)
        sys.stdout = saved_stdout


async def serve_stdio(
    app: ServerApp,
    *,
    stdin: anyio.abc.ByteReceiveStream | None = None,
    stdout: anyio.abc.ByteSendStream | None = None,
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
    stop: Stop | None = None,
    **connection_options: Any,
) -> None:
    """Serve ``app`` on ``stdin``/``stdout`` (fds 0 and 1 by default) until stdin ends,
    or until ``stop`` is set: then stdin is closed, which the driver reads as its end
    (what runs gets ``drain_timeout``, its answers are written).

    With the default stdout, fd 1 and ``sys.stdout`` point at stderr while
    serving (restored afterwards; :func:`guard_stdout`, or the guard already
    taken), so only protocol messages reach the real stdout.  Given streams are
    used as they are and left open.
    ``connection_options`` go to ``mrtr_core.Connection``.
    """
    async with AsyncExitStack() as owned:
        if stdin is None:
            own_stdin = FdStream(os.dup(0))  # our own fd: closing it leaves fd 0 be
            owned.push_async_callback(own_stdin.aclose)
            stdin = own_stdin
        if stdout is None:
            protocol_fd = owned.enter_context(guard_stdout())
            own_stdout = FdStream(os.dup(protocol_fd))
            owned.push_async_callback(own_stdout.aclose)
            stdout = own_stdout
        serving = serve_stream(
            app, stdin, stdout, drain_timeout=drain_timeout, **connection_options
        )
        if stop is None:
            await serving
            return
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(_close_on, stop, stdin)
            await serving
            nursery.cancel_scope.cancel()


async def _close_on(stop: Stop, stdin: anyio.abc.ByteReceiveStream) -> None:
    await stop.wait()
    await stdin.aclose()  # a read waiting on it ends (ClosedResourceError: the end of input)
