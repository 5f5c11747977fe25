"""The fuzz targets: one function per parser and per connection role, bytes in.

Each target takes the fuzzer's bytes, drives one part of the core with them
and lets only what the core documents come out: an :class:`mrtr_core.MrtrError`
(or a subclass).  Anything else (``KeyError``, ``TypeError``, an
``AssertionError`` from an invariant checked here, a loop that never returns
``NEED_DATA``) propagates, and the fuzzer records the input as a crash.

This package does not import atheris: the same functions run under the fuzzer
(``fuzz_one.py``, instrumented), under ``coverage`` when the corpus is
replayed (``replay.py``) and in ``test_regressions.py``.

Input layout: the first one to three bytes are *control* bytes (which scenario,
which framing, how the stream is cut into chunks); the rest is what the peer
sends.  ``make_corpus.py`` writes seeds in that layout.
"""

from __future__ import annotations

from collections.abc import Callable

from ._common import (
    ALL_CAPS,
    CLIENT_INFO,
    LEGACY,
    MAX_BUFFER,
    MAX_MESSAGE,
    MODERN,
    SERVER_INFO,
    guarded,
    lines_of,
    run,
)
from .client import FORM, ROOTS, SAMPLE, ClientApp, answer_for, client, client_setup
from .engine import engine
from .parsers import PAYLOADS, codec, convert, framing, headers, sse
from .schemas import SCHEMAS, SPEC_FORM_SHAPE, schemas
from .server import POOL_PARAMS, STATE_POOL, ServerApp, legacy_shim, server
from .sessions import client_sessions, http_sessions
from .tasks import tasks
from .wire12 import url_callback, websocket

TARGETS: dict[str, Callable[[bytes], None]] = {
    "framing": framing,
    "sse": sse,
    "codec": codec,
    "convert": convert,
    "headers": headers,
    "client": client,
    "server": server,
    "legacy_shim": legacy_shim,
    "engine": engine,
    "schemas": schemas,
    "http_sessions": http_sessions,
    "client_sessions": client_sessions,
    "websocket": websocket,
    "url_callback": url_callback,
    "tasks": tasks,
}

__all__ = [
    "ALL_CAPS",
    "CLIENT_INFO",
    "FORM",
    "LEGACY",
    "MAX_BUFFER",
    "MAX_MESSAGE",
    "MODERN",
    "PAYLOADS",
    "POOL_PARAMS",
    "ROOTS",
    "SAMPLE",
    "SCHEMAS",
    "SERVER_INFO",
    "SPEC_FORM_SHAPE",
    "STATE_POOL",
    "TARGETS",
    "ClientApp",
    "ServerApp",
    "answer_for",
    "client_setup",
    "guarded",
    "lines_of",
    "run",
]
