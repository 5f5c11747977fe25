"""Serve a ``ServerApp`` on stdin/stdout: the MCP stdio transport, server side.

The model: the client starts us as a child process and writes one JSON-RPC
message per line to our stdin; we write one per line to our stdout, and
nothing else may ever reach stdout.  So before serving, ``serve_stdio``
moves the real stdout out of everyone's way: it keeps a private duplicate of
file descriptor 1 for the protocol, points fd 1 itself at stderr (so even a C
extension or a child process that writes to fd 1 lands on stderr) and sets
``sys.stdout`` to ``sys.stderr`` (so ``print`` in a handler does too).  Logging
goes to stderr, which the client must not treat as an error.

Everything else is the shared driver (``_serve.serve_stream``): one task per
request, ``notifications/cancelled`` cancels that handler and nothing is sent
for it, 2025-era clients (``initialize``) are served through the legacy shim,
and at the end of stdin the server exits: open ``subscriptions/listen``
streams end first with their final result (when the app has
``close_subscriptions()``, as ``McpApp`` does), running handlers get
``drain_timeout`` seconds (1 s) to finish, then are cancelled.

Run it::

    python -m mrtr_transports.server.stdio --app mypackage.server:app
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from typing import Any

import trio

from .app import ServerApp
from .driver import DEFAULT_DRAIN_TIMEOUT, AppSpecError, load_app, serve_stream

__all__ = ["main", "serve_stdio"]


async def serve_stdio(
    app: ServerApp,
    *,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
    **connection_options: Any,
) -> None:
    """Serve ``app`` on ``stdin``/``stdout`` (fds 0 and 1 by default) until stdin ends.

    With the default stdout, fd 1 and ``sys.stdout`` point at stderr while
    serving (restored afterwards), so only protocol messages reach the real
    stdout.  Given streams are used as they are and left open.
    ``connection_options`` go to ``mrtr_core.Connection``.
    """
    owned: list[trio.lowlevel.FdStream] = []
    saved_fd1: int | None = None
    saved_stdout = sys.stdout
    try:
        if stdin is None:
            stdin = trio.lowlevel.FdStream(os.dup(0))  # our own fd: closing it leaves fd 0 be
            owned.append(stdin)
        if stdout is None:
            sys.stdout.flush()
            protocol_fd = os.dup(1)
            saved_fd1 = os.dup(1)
            os.dup2(2, 1)  # from now on whatever writes to fd 1 writes to stderr
            sys.stdout = sys.stderr
            stdout = trio.lowlevel.FdStream(protocol_fd)
            owned.append(stdout)
        await serve_stream(app, stdin, stdout, drain_timeout=drain_timeout, **connection_options)
    finally:
        for stream in owned:
            stream.close()
        if saved_fd1 is not None:
            os.dup2(saved_fd1, 1)
            os.close(saved_fd1)
            sys.stdout = saved_stdout


def main(argv: list[str] | None = None) -> int:
    """``python -m mrtr_transports.server.stdio --app MODULE:ATTR``."""
    parser = argparse.ArgumentParser(
        prog="python -m mrtr_transports.server.stdio",
        description="Serve an MCP server app on stdin/stdout (logs go to stderr).",
    )
    parser.add_argument("--app", required=True, metavar="MODULE:ATTR", help="the ServerApp")
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=DEFAULT_DRAIN_TIMEOUT,
        metavar="SEC",
        help="at the end of stdin, how long running handlers may finish (default: %(default)s)",
    )
    parser.add_argument("--log-level", default="WARNING", help="stderr log level")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    try:
        with contextlib.redirect_stdout(sys.stderr):  # a print at import must not reach stdout
            app = load_app(args.app)
    except AppSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        trio.run(lambda: serve_stdio(app, drain_timeout=args.drain_timeout))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
