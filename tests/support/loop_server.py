"""A server on the loop a test chooses: ``python loop_server.py stdio|ws trio|asyncio [APP]``.

``APP`` is an app spec (``support.loop_app:app`` by default, see there); stdio
serves until stdin ends, ``ws`` listens on 127.0.0.1 (a free port) and writes
``listening on ws://127.0.0.1:PORT/mcp`` on stderr, then serves until killed.
``MRTR_DRAIN_TIMEOUT`` sets the stdio drain time.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import anyio
from mrtr_transports.cli.app_loading import load_app
from mrtr_transports.server.stdio import serve_stdio
from mrtr_transports.server.ws import WsServer


async def serve_ws(app: Any) -> None:
    server = WsServer(app)
    async with anyio.create_task_group() as tasks:
        host, port = await tasks.start(server.serve)
        sys.stderr.write(f"listening on ws://{host}:{port}/mcp\n")
        sys.stderr.flush()


def main() -> None:
    transport, backend = sys.argv[1], sys.argv[2]
    app = load_app(sys.argv[3] if len(sys.argv) > 3 else "support.loop_app:app")
    if transport == "stdio":
        drain = float(os.environ.get("MRTR_DRAIN_TIMEOUT", "1"))
        anyio.run(functools.partial(serve_stdio, app, drain_timeout=drain), backend=backend)
    else:
        anyio.run(serve_ws, app, backend=backend)


if __name__ == "__main__":
    main()
