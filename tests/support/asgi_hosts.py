"""``McpAsgi`` served by a real ASGI server on 127.0.0.1, for tests written against the trio
server's ``serving(app, **options)``: hypercorn's trio worker in this process (so a test may
look at the endpoint's state, ``McpAsgi.sessions``), or uvicorn (asyncio) as a subprocess
serving ``support.asgi_conformance:endpoint`` (the conformance fixtures app, or another
named one) with the options passed as JSON in ``MRTR_ASGI_OPTIONS``.  Each yields (the
endpoint or ``None`` for a subprocess, host, port).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from mrtr_transports.asgi import McpAsgi
from mrtr_transports.server.app import ServerApp

from support.asgi_conformance import FIXTURES
from support.asgi_servers import serving

#: The in-process kind and the subprocess kind.
HYPERCORN = "asgi-hypercorn-trio"
UVICORN = "asgi-uvicorn"


@asynccontextmanager
async def hypercorn_serving(
    app: ServerApp, **options: Any
) -> AsyncIterator[tuple[McpAsgi, str, int]]:
    endpoint = McpAsgi(app, **options)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 0.5
    config.accesslog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(serve, endpoint, config, shutdown_trigger=stop.wait))
        address = urlsplit(binds[0])
        yield endpoint, address.hostname or "127.0.0.1", address.port or 0
        stop.set()


@asynccontextmanager
async def uvicorn_serving(
    app: str = FIXTURES, **options: Any
) -> AsyncIterator[tuple[None, str, int]]:
    """uvicorn serving ``app`` (``module:attribute``) as ``McpAsgi(app, **options)``."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "uvicorn.log"
        env = {"MRTR_ASGI_OPTIONS": json.dumps(options), "MRTR_ASGI_APP": app}
        target = "support.asgi_conformance:endpoint"
        with serving("uvicorn", target, log, factory=True, env=env) as base:
            address = urlsplit(base)
            try:
                yield None, address.hostname or "127.0.0.1", address.port or 0
            except BaseException:
                print(log.read_text()[-3000:])
                raise
