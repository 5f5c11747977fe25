"""A pipe's file descriptor as an anyio byte stream, on whichever loop runs it.

The stdio server reads fd 0 and writes a duplicate of fd 1; neither is a socket,
so anyio's socket streams do not apply, and a thread per read would cost a hop
per message.  :class:`FdStream` puts the descriptor in non-blocking mode, reads
and writes it directly (``os.read``, ``os.write``) and, when it would block,
waits for it through the loop that runs it, resolved once per stream:

* trio: ``trio.lowlevel.wait_readable`` / ``wait_writable``; ``aclose`` wakes a
  waiter with ``notify_closing`` (what ``trio.lowlevel.FdStream`` does);
* asyncio: the selector loop's ``add_reader`` / ``add_writer`` with a future of
  our own, which ``aclose`` fails.  (``anyio.wait_readable`` would do as well,
  but its closing notice only reaches waiters of the same context, and the
  stdio server closes stdin from another task.)

A waiter woken by ``aclose`` raises ``ClosedResourceError``, which a reader takes
as the end of its input.
"""

from __future__ import annotations

import asyncio
import errno
import os
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio

__all__ = ["FdStream"]

#: Bytes a plain ``receive()`` reads at most.
DEFAULT_RECEIVE_SIZE = 65536


class _TrioWaits:
    """Waiting for a descriptor on trio."""

    def __init__(self) -> None:
        import trio.lowlevel  # (only on trio: its own primitives, the cheapest there)

        self._trio = trio
        self.readable = trio.lowlevel.wait_readable
        self.writable = trio.lowlevel.wait_writable

    def closing(self, fd: int) -> None:
        self._trio.lowlevel.notify_closing(fd)

    def closed_error(self) -> type[BaseException]:
        return self._trio.ClosedResourceError


class _AsyncioWaits:
    """Waiting for a descriptor on asyncio's selector loop, with futures we can fail."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._waiting: dict[str, asyncio.Future[None]] = {}

    async def readable(self, fd: int) -> None:
        await self._wait(fd, "read", self._loop.add_reader, self._loop.remove_reader)

    async def writable(self, fd: int) -> None:
        await self._wait(fd, "write", self._loop.add_writer, self._loop.remove_writer)

    async def _wait(self, fd: int, way: str, add: Any, remove: Any) -> None:
        if way in self._waiting:
            raise anyio.BusyResourceError(f"{way}ing from the descriptor")
        future: asyncio.Future[None] = self._loop.create_future()
        add(fd, _resolve, future)
        self._waiting[way] = future
        try:
            await future
        finally:
            if self._waiting.pop(way, None) is not None:  # (closed: aclose removed it)
                remove(fd)

    def closing(self, fd: int) -> None:
        for way, future in self._waiting.items():
            (self._loop.remove_reader if way == "read" else self._loop.remove_writer)(fd)
            if not future.done():
                future.set_exception(anyio.ClosedResourceError())
        self._waiting.clear()

    def closed_error(self) -> type[BaseException]:
        return anyio.ClosedResourceError


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class FdStream(anyio.abc.ByteReceiveStream, anyio.abc.ByteSendStream):
    """Owns ``fd`` (a pipe end, a tty): non-blocking from now on, closed by ``aclose``."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._closed = False
        self._waits: _TrioWaits | _AsyncioWaits | None = None

    def fileno(self) -> int:
        """The descriptor; -1 once closed (so a direct ``os.read`` fails with EBADF)."""
        return -1 if self._closed else self._fd

    def _loop_waits(self) -> _TrioWaits | _AsyncioWaits:
        if self._waits is None:
            trio = sniffio.current_async_library() == "trio"
            self._waits = _TrioWaits() if trio else _AsyncioWaits()
        return self._waits

    async def wait_readable(self) -> None:
        """Until a read would not block; ``ClosedResourceError`` once closed."""
        waits = self._loop_waits()
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            await waits.readable(self._fd)
        except waits.closed_error() as exc:
            raise anyio.ClosedResourceError from exc

    async def wait_writable(self) -> None:
        waits = self._loop_waits()
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            await waits.writable(self._fd)
        except waits.closed_error() as exc:
            raise anyio.ClosedResourceError from exc

    async def receive(self, max_bytes: int = DEFAULT_RECEIVE_SIZE) -> bytes:
        waited = False
        while True:
            try:
                data = os.read(self.fileno(), max_bytes)
            except BlockingIOError:
                waited = True
                await self.wait_readable()
                continue
            except OSError as exc:
                raise _broken(exc) from exc
            if not waited:
                await anyio.lowlevel.checkpoint()
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(item)
        while view:
            try:
                written = os.write(self.fileno(), view)
            except BlockingIOError:
                await self.wait_writable()
                continue
            except OSError as exc:
                raise _broken(exc) from exc
            view = view[written:]
        await anyio.lowlevel.cancel_shielded_checkpoint()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            if self._waits is not None:
                self._waits.closing(self._fd)  # a waiter wakes: ClosedResourceError
            os.close(self._fd)
        await anyio.lowlevel.checkpoint()


def _broken(exc: OSError) -> Exception:
    if exc.errno == errno.EBADF:
        return anyio.ClosedResourceError()
    return anyio.BrokenResourceError()
