"""A head deadline for uvicorn, which has none of its own.

uvicorn's only timer on a connection (``--timeout-keep-alive``) starts after a
response and is reset by every byte, so a head sent a byte at a time, or a new
connection that sends nothing, is kept for as long as its client likes (measured
in docs/asgi.md).  ``HeadDeadlineH11Protocol`` is uvicorn's h11 protocol with the
host's rule (``mrtr serve --http``'s ``head_timeout``): from the moment a head is
awaited (a new connection, or one kept alive after its response) the whole head
must arrive within ``head_timeout`` seconds (10 by default), however it trickles;
past it the connection is closed, with a 408 when part of a head had come::

    uvicorn myserver:web --http mrtr_transports.asgi.uvicorn_protocol:HeadDeadlineH11Protocol

``with_head_timeout(seconds)`` makes the class for another deadline (name it in a
module of yours for ``--http``).  It is uvicorn's h11 protocol (not httptools'),
and it reaches into that class (``conn``, ``transport``, ``on_response_complete``):
tested with uvicorn 0.54.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..host.bounds import DEFAULT_HEAD_TIMEOUT, check_bounds
from ..host.refusals import refusal_bytes

__all__ = ["HeadDeadlineH11Protocol", "with_head_timeout"]


class HeadDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with a deadline for each request head."""

    head_timeout: float = DEFAULT_HEAD_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_begun = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_deadline is not None and data:
            self._head_begun = True
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head is whole (or the client gone)
            self._head_arrived()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()  # kept alive: the next head has the same deadline

    def _await_head(self) -> None:
        self._head_arrived()
        self._head_begun = False
        self._head_deadline = self.loop.call_later(self.head_timeout, self._head_late)

    def _head_arrived(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._head_begun:  # a client that began a request is told why it ends
            message = f"the request head took longer than {self.head_timeout:g} s"
            self.transport.write(refusal_bytes(408, message))
        self.transport.close()


def with_head_timeout(seconds: float) -> type[HeadDeadlineH11Protocol]:
    """``HeadDeadlineH11Protocol`` with a head deadline of ``seconds``."""
    check_bounds((), (("head_timeout", seconds),))
    name = f"HeadDeadlineH11Protocol_{seconds:g}s".replace(".", "_")
    return type(name, (HeadDeadlineH11Protocol,), {"head_timeout": float(seconds)})
