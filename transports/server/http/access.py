"""The HTTP server's access log: one line per HTTP request (``server/access.py``).

``HttpConnection`` with three hooks: ``_handle`` times the request and writes the
line at its end (whatever way it ended), ``_serialize`` sees the status and the
body bytes of what is written, ``_handle_message`` reads the JSON-RPC method and
tool from the body.  The server uses this class only while the access log is on
(``HttpServer``), so with it off the hot path is the plain connection's: not one
check more per request.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import h11

import mrtr_core as m

from ..access import http_line
from .exchange import HttpConnection
from .policy import Headers

__all__ = ["LoggedHttpConnection"]


class LoggedHttpConnection(HttpConnection):
    """An ``HttpConnection`` that leaves an access line per request."""

    _status: int | None = None
    _body_bytes = 0
    _message: Any = None

    async def _handle(self, request: h11.Request) -> None:
        self._status, self._body_bytes, self._message = None, 0, None
        started = time.perf_counter()
        try:
            await super()._handle(request)
        finally:
            http_line(
                self.peer,
                request.method,
                request.target,
                self._status,
                started,
                self._body_bytes,
                self._message,
            )

    def _serialize(self, events: Sequence[Any]) -> bytes:
        for event in events:
            if isinstance(event, h11.Response):
                self._status = event.status_code
            elif isinstance(event, h11.Data):
                self._body_bytes += len(event.data)
        return super()._serialize(events)

    async def _handle_message(
        self, headers: Headers, body: bytes, json_ok: bool, sse_ok: bool
    ) -> None:
        with contextlib.suppress(m.MrtrError):  # (no MCP method shown: the answer says why)
            self._message = m.wire._codec.default_codec.loads(body)
        await super()._handle_message(headers, body, json_ok, sse_ok)
