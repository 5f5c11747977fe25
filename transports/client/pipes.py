"""Our end of a pipe to a child process, read and written directly.

The stdio link owns its pipes rather than taking the loop's process streams: a write
goes to the pipe at once (``os.write``, no task hop) and a read takes whatever is
there (``os.read``); only when the pipe would block does the task wait for the loop
(``anyio.wait_writable`` / ``wait_readable``).  The same on trio and on asyncio.
"""

from __future__ import annotations

import os

import anyio

from .._loop import LoopTools

__all__ = ["PipeEnd"]


class PipeEnd:
    """One end of a pipe, non-blocking; closed once (its descriptor is never reused
    by mistake: a closed end raises ``ClosedResourceError``)."""

    def __init__(self, fd: int, loop: LoopTools | None = None) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        # (the loop's own wait, looked up once: _loop.py)
        self._wait_readable = loop.wait_readable if loop is not None else anyio.wait_readable

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def _fileno(self) -> int:
        if self._fd < 0:
            raise anyio.ClosedResourceError
        return self._fd

    def write_now(self, data: bytes | memoryview) -> int:
        """Write what the pipe takes without waiting; how many bytes that was.
        ``OSError`` (``BrokenPipeError``) when the reader is gone."""
        try:
            return os.write(self._fileno(), data)
        except BlockingIOError:
            return 0

    async def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self.write_now(view) :]
            if view:
                await anyio.wait_writable(self._fileno())

    def read_now(self, size: int) -> bytes | None:
        """What the pipe holds, up to ``size`` bytes (``b""`` at its end); ``None`` when
        it holds nothing yet."""
        try:
            return os.read(self._fileno(), size)
        except BlockingIOError:
            return None

    async def wait_readable(self) -> None:
        await self._wait_readable(self._fileno())

    def close(self) -> None:
        """Close it (the task that waits on it closes it, so no wait is left behind)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
