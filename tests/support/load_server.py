"""A Streamable HTTP server with its bounds set from the command line, for load and fault tests.

The serve entry (``mrtr serve --http``) runs ``HttpServer`` with its defaults;
these tests need small bounds (``max_connections``, ``idle_timeout``,
``write_timeout``) so that hitting them takes a few clients and seconds::

    python -m support.load_server --http 127.0.0.1:0 --max-connections 8 \\
        --idle-timeout 2 --write-timeout 1 [--app support.load_app:app]

``tests/`` on ``PYTHONPATH``.  Like the serve entry it says
``listening on http://HOST:PORT/mcp`` on stderr once it accepts connections,
and serves until killed.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from typing import Any

import trio
from mrtr_transports.server.driver import load_app
from mrtr_transports.server.http.server import serve_http


async def _serve(app: Any, host: str, port: int, options: dict[str, Any]) -> None:
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(functools.partial(serve_http, app, host, port, **options))
        sys.stderr.write(f"listening on http://{bound[0]}:{bound[1]}/mcp\n")
        sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m support.load_server")
    parser.add_argument("--http", required=True, metavar="HOST:PORT")
    parser.add_argument("--app", default="support.load_app:app")
    parser.add_argument("--max-connections", type=int, default=256)
    parser.add_argument("--idle-timeout", type=float, default=60.0)
    parser.add_argument("--write-timeout", type=float, default=60.0)
    parser.add_argument("--keepalive-interval", type=float, default=15.0)
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    host, _, port = args.http.rpartition(":")
    options = {
        "max_connections": args.max_connections,
        "idle_timeout": args.idle_timeout,
        "write_timeout": args.write_timeout,
        "keepalive_interval": args.keepalive_interval,
    }
    try:
        trio.run(_serve, load_app(args.app), host, int(port), options)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
