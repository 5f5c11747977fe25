"""The host's access log: one line per HTTP request (the line's form: ``server/access.py``).

The host sees what every answer is (its status, its body bytes: the app's and the
host's own refusals alike) and how long the request took; the MCP method and the
tool are the endpoint's to know, and it says them through the request's scope
(``note_message``, under the ASGI extension ``ACCESS_SCOPE_KEY``, which the host
adds only while it logs).  Whether it logs is decided once, when the host is made
(``access_enabled``): off, a request costs one attribute test more.
"""

from __future__ import annotations

import time
from typing import Any

import h11

from ..server.access import ACCESS_SCOPE_KEY, http_line
from .asgi import Scope

__all__ = ["AccessRecord"]


class AccessRecord:
    """What one request's line says, gathered while it is answered."""

    __slots__ = ("body_bytes", "noted", "started", "status")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.status: int | None = None
        self.body_bytes = 0
        #: What the endpoint notes (``message``), through the scope's extension.
        self.noted: dict[str, Any] = {}

    def extend(self, scope: Scope) -> None:
        """Give the request's scope the extension the endpoint notes its message in."""
        scope.setdefault("extensions", {})[ACCESS_SCOPE_KEY] = self.noted

    def wrote(self, status: int | None, body_bytes: int) -> None:
        """A response head (``status``) or body bytes went out."""
        if status is not None:
            self.status = status
        self.body_bytes += body_bytes

    def write_line(self, peer: str | None, request: h11.Request) -> None:
        http_line(
            peer,
            request.method,
            request.target,
            self.status,
            self.started,
            self.body_bytes,
            self.noted.get("message"),
        )
