"""What the host tests share: the host serving an app on 127.0.0.1, a raw h11 client on anyio
sockets (so a test runs on trio and asyncio alike), a trickler, and the server log.

``hosting(app, **bounds)`` starts ``AsgiHost`` on port 0 in the test's task
group and closes it at the end; ``HttpPeer`` is one client connection whose
requests and responses are written and read with h11 (not the project's client).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import anyio.abc
import attrs
import h11
from mrtr_transports.host import AsgiHost

Header = tuple[str, str]
STREAM_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)


@attrs.frozen
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers["content-type"] == "application/json", self
        return json.loads(self.body)


class HttpPeer:
    """One HTTP/1.1 client connection, written with h11."""

    def __init__(self, stream: anyio.abc.SocketStream, host: str) -> None:
        self.stream = stream
        self.host = host
        self.h11 = h11.Connection(h11.CLIENT)

    async def send_request(
        self,
        target: str = "/echo",
        body: bytes | None = None,
        *,
        method: str | None = None,
        extra: Sequence[Header] = (),
    ) -> None:
        method = method or ("GET" if body is None else "POST")
        fields: list[Header] = [("Host", self.host), *extra]
        if body is not None:
            fields += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        data = self.h11.send(h11.Request(method=method, target=target, headers=fields)) or b""
        if body:
            data += self.h11.send(h11.Data(data=body)) or b""
        data += self.h11.send(h11.EndOfMessage()) or b""
        await self.stream.send(data)

    async def next_event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await self.stream.receive(65536)
                except anyio.EndOfStream:
                    data = b""
                self.h11.receive_data(data)
                continue
            return event

    async def head(self) -> h11.Response:
        response = await self.next_event()
        assert isinstance(response, h11.Response), response
        return response

    async def reply(self) -> Reply:
        response = await self.head()
        body = b""
        while not isinstance(event := await self.next_event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data), event
            body += event.data
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        headers = {k.decode(): v.decode() for k, v in response.headers}
        return Reply(status=response.status_code, headers=headers, body=body)

    async def request(self, target: str = "/echo", body: bytes | None = None, **kw: Any) -> Reply:
        await self.send_request(target, body, **kw)
        return await self.reply()

    async def closed_by_server(self) -> bool:
        try:
            return await self.stream.receive(65536) == b""
        except STREAM_GONE:
            return True


@attrs.define
class Hosted:
    host: AsgiHost
    address: str
    port: int

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[HttpPeer]:
        stream = await anyio.connect_tcp(self.address, self.port)
        async with stream:
            yield HttpPeer(stream, f"{self.address}:{self.port}")

    async def request(self, target: str = "/echo", body: bytes | None = None, **kw: Any) -> Reply:
        async with self.connect() as peer:
            return await peer.request(target, body, **kw)

    async def raw(self, data: bytes, *, eof: bool = True) -> bytes:
        """Send ``data`` (then the end of our output), and read everything until the close."""
        received = b""
        async with await anyio.connect_tcp(self.address, self.port) as stream:
            try:
                await stream.send(data)
                if eof:
                    await stream.send_eof()
            except STREAM_GONE:
                pass  # the host answered and closed before taking it all
            try:
                while True:
                    received += await stream.receive(65536)
            except STREAM_GONE:
                pass
        return received


@asynccontextmanager
async def hosting(app: Any, *, grace: float = 0.5, **options: Any) -> AsyncIterator[Hosted]:
    host = AsgiHost(app, **options)
    async with anyio.create_task_group() as tasks:
        address, port = await tasks.start(host.serve, "127.0.0.1", 0)
        yield Hosted(host, address, port)
        await host.aclose(grace=grace)


def status_of(data: bytes) -> int:
    """The status of the first response in ``data``."""
    return int(data.split(b" ", 2)[1])


def body_of(data: bytes) -> bytes:
    return data.partition(b"\r\n\r\n")[2]


class Trickler:
    """An attacker's socket: a request head a byte at a time; reconnects when dropped."""

    HEAD = b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" * 50

    def __init__(self, hosted: Hosted, interval: float, reconnect_after: float) -> None:
        self.hosted = hosted
        self.interval = interval
        self.reconnect_after = reconnect_after
        self.answers: list[int] = []
        self.connected = anyio.Event()

    async def run(self) -> None:
        while True:
            stream = await anyio.connect_tcp(self.hosted.address, self.hosted.port)
            async with stream:
                self.connected.set()
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(self._drip, stream, tasks.cancel_scope)
                    received = b""
                    try:
                        while True:
                            received += await stream.receive(65536)
                    except STREAM_GONE:
                        pass
                    tasks.cancel_scope.cancel()
                if received:
                    self.answers.append(status_of(received))
            await anyio.sleep(self.reconnect_after)

    async def _drip(self, stream: anyio.abc.SocketStream, scope: anyio.CancelScope) -> None:
        try:
            for byte in self.HEAD:
                await stream.send(bytes([byte]))
                await anyio.sleep(self.interval)
        except STREAM_GONE:
            scope.cancel()


@contextmanager
def server_log() -> Iterator[list[logging.LogRecord]]:
    """Every record the host (and the app) logs meanwhile."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("mrtr")
    handler = Keep(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def tracebacks(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.exc_info or r.levelno >= logging.ERROR]
