"""A Streamable HTTP server with its bounds set from the command line, for load and fault tests.

The serve entry (``mrtr serve --http``) runs ``HttpServer`` with its defaults;
these tests need small bounds (``max_connections``, ``idle_timeout``,
``write_timeout``, ...) so that hitting them takes a few clients and seconds::

    python -m support.load_server --http 127.0.0.1:0 \\
        --set max_connections=8 --set idle_timeout=2 [--app support.load_app:app] \
        [--loop asyncio]

Each ``--set NAME=VALUE`` is an ``HttpServer`` keyword (a number).  One this
checkout's ``HttpServer`` does not take is left out, and named on stderr, so a
test can ask for a bound a newer server has (``head_timeout``, say) and run
against an older one.

``tests/`` on ``PYTHONPATH``.  Like the serve entry it says
``listening on http://HOST:PORT/mcp`` on stderr once it accepts connections,
and serves until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import logging
import sys
from typing import Any

import anyio
from mrtr_transports.cli.app_loading import load_app
from mrtr_transports.server.http import HttpServer, serve_http


async def _serve(app: Any, host: str, port: int, options: dict[str, Any]) -> None:
    async with anyio.create_task_group() as tasks:
        bound = await tasks.start(functools.partial(serve_http, app, host, port, **options))
        sys.stderr.write(f"listening on http://{bound[0]}:{bound[1]}/mcp\n")
        sys.stderr.flush()


def server_options(settings: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` settings as ``HttpServer`` keywords, those it does not take left out."""
    known = inspect.signature(HttpServer.__init__).parameters
    options: dict[str, Any] = {}
    for setting in settings:
        name, _, text = setting.partition("=")
        if name not in known:
            sys.stderr.write(f"load_server: this HttpServer has no {name}: left out\n")
            continue
        options[name] = int(text) if text.isdigit() else float(text)
    return options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m support.load_server")
    parser.add_argument("--http", required=True, metavar="HOST:PORT")
    parser.add_argument("--app", default="support.load_app:app")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--loop", choices=("trio", "asyncio"), default="trio")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    host, _, port = args.http.rpartition(":")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops
        app, options = load_app(args.app), server_options(args.set)
        anyio.run(_serve, app, host, int(port), options, backend=args.loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
