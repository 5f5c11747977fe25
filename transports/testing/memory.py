"""An app served in memory: the client's link and the server's streams, no socket, no process.

The model: the real transports are two halves that meet at a byte stream.  The
client half is a :class:`~mrtr_transports.client.client.Client` (its connection,
its round engine, its input handler) over a *link*; the server half is the
shared driver, :func:`~mrtr_transports.server.driver.serve_stream`, which
runs a ``ServerApp`` on a newline-delimited stream exactly as stdio does
(2025-era clients through the legacy shim included).  :class:`MemoryLink` is a
link whose "wire" is a pair of in-memory pipes to a ``serve_stream`` task of its
own, so everything between the two halves is the code a real deployment runs;
only the bytes never leave the process.

Bounds: what the client sends waits in a channel of ``max_queued`` messages
(past that the server is taken as stuck, as stdio takes a child that stops
reading); what the server writes goes to the client at once.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.abc import TaskGroup

import mrtr_core as m

from .._loop import LoopTools
from ..client.errors import TransportError
from ..client.link import LinkClient, Outbound
from ..server.app import ServerApp
from ..server.driver import serve_stream

__all__ = ["MemoryLink"]


class _ClientToServer(anyio.abc.ByteReceiveStream):
    """The server's input: the messages the client transmitted, in order, at most
    ``max_queued`` waiting.  A plain queue and one event at a time (a memory object
    stream looks the loop up several times per message; ``_loop.py``)."""

    def __init__(self, max_queued: int, loop: LoopTools) -> None:
        self._queue: deque[bytes] = deque()
        self._max_queued = max_queued
        self._loop = loop
        self._arrived: anyio.Event | None = None
        self._ended = False  # the client closed its side: the end of input, once drained
        self._dropped = False  # the server closed its side: nothing is read any more

    def put(self, data: bytes) -> bool:
        """Queue ``data`` for the server; False when ``max_queued`` already wait."""
        if self._ended or self._dropped:
            return True  # shutting down
        if len(self._queue) >= self._max_queued:
            return False
        self._queue.append(data)
        self._wake()
        return True

    def end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._arrived is not None:
            self._arrived.set()
            self._arrived = None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._queue:
            await self._loop.checkpoint()  # (a receive is a checkpoint, as on a real stream)
        while not self._queue:
            if self._ended or self._dropped:
                raise anyio.EndOfStream
            arrived = self._arrived = self._loop.event()
            await arrived.wait()
        return self._queue.popleft()

    async def aclose(self) -> None:
        self._dropped = True
        self._queue.clear()
        await self._loop.checkpoint()


class _ServerToClient(anyio.abc.ByteSendStream):
    """The server's output: straight into the client's connection."""

    def __init__(self, client: LinkClient, loop: LoopTools) -> None:
        self._client = client
        self._checkpoint = loop.checkpoint  # (looked up once: _loop.py)

    async def send(self, item: bytes) -> None:
        await self._checkpoint()  # (a send is a checkpoint, as on a real stream)
        self._client.receive_data(bytes(item))

    async def aclose(self) -> None:
        await self._checkpoint()


class MemoryLink:
    """A client link to ``app``, served in this process by the shared server driver.

    ``server_options`` go to :func:`~mrtr_transports.server.driver.serve_stream`
    (``drain_timeout``, ``legacy_answer_timeout``, the ``Connection``'s bounds).
    """

    framing: Literal["lines", "messages"] = "lines"
    needs_messages = False
    wants_tool_list = False
    confirms_transmission = False  # handed to the channel is sent
    cancellation: Literal["notify", "close_stream"] = "notify"

    def __init__(self, app: ServerApp, *, max_queued: int = 4096, **server_options: Any) -> None:
        self.app = app
        self._server_options = server_options
        self._max_queued = max_queued
        self._to_server: _ClientToServer | None = None
        self._client: LinkClient | None = None
        self._served = anyio.Event()

    async def start(self, client: LinkClient, task_group: TaskGroup) -> None:
        self._client = client
        loop = LoopTools()
        self._to_server = _ClientToServer(self._max_queued, loop)
        task_group.start_soon(self._serve, self._to_server, _ServerToClient(client, loop), client)

    async def _serve(
        self, incoming: _ClientToServer, outgoing: _ServerToClient, client: LinkClient
    ) -> None:
        try:
            await serve_stream(self.app, incoming, outgoing, **self._server_options)
        finally:
            self._served.set()
        # The server stopped serving (the client closed its side, or the app broke).
        client.link_lost(TransportError("the in-memory server stopped", kind="disconnect"))

    def transmit(self, out: Outbound) -> None:
        if self._to_server is None:
            return
        if not self._to_server.put(out.data):
            assert self._client is not None
            self._client.link_lost(
                TransportError(
                    f"the server is not reading ({self._max_queued} messages waiting)",
                    kind="disconnect",
                )
            )

    def close_stream(self, request_id: m.RequestId) -> None:
        """Nothing to close on a shared stream: the cancellation went out as a message."""

    def tools_listed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return tools  # no headers in memory: x-mcp-header annotations play no part

    async def aclose(self) -> None:
        """Close the client's side; the server answers what it still can (its drain
        time), then stops, as a stdio server does at the end of its input."""
        if self._to_server is None:
            return
        self._to_server.end()
        await self._served.wait()
