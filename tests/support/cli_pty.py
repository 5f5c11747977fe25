"""A real pseudo-terminal for prompt tests: the program gets the terminal end, the test types.

``PtyUser`` owns both ends of ``os.openpty()``.  The program under test reads
and writes the *terminal* end (``slave_fd``: a tty, so ``isatty()`` is true and
the line discipline does what it does for a person: line editing, echo, Ctrl-D
as end of input).  The test is the person at the keyboard: ``expect`` reads
what was printed until a text appears, ``type`` sends keystrokes.
"""

from __future__ import annotations

import contextlib
import os
from typing import TextIO

import trio


class PtyUser:
    """The keyboard-and-screen side of a pseudo-terminal."""

    def __init__(self) -> None:
        self.master_fd, self.slave_fd = os.openpty()
        self._screen = trio.lowlevel.FdStream(os.dup(self.master_fd))
        self.output = ""  # everything printed so far (with the terminal's echo of our typing)
        self._seen = 0  # how much of it earlier ``expect`` calls consumed

    def terminal_files(self) -> tuple[TextIO, TextIO]:
        """Text files on the terminal end, for a program's stdin and its prompt output."""
        infile = open(self.slave_fd, encoding="utf-8", closefd=False)  # noqa: SIM115
        outfile = open(self.slave_fd, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        return infile, outfile

    async def expect(self, text: str, timeout: float = 5.0) -> str:
        """Read the screen until ``text`` appears after what was already seen; the new part."""
        with trio.fail_after(timeout):
            while text not in self.output[self._seen :]:
                try:
                    chunk = await self._screen.receive_some(4096)
                except (trio.BrokenResourceError, OSError):  # EIO: the terminal end closed
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"{text!r} never appeared; screen:\n{self.output}")
                self.output += chunk.decode("utf-8", "replace")
        end = self.output.index(text, self._seen) + len(text)
        seen, self._seen = self._seen, end
        return self.output[seen:end]

    async def drain(self, wait: float = 0.05) -> str:
        """Whatever is printed within ``wait`` seconds (without consuming it)."""
        with trio.move_on_after(wait):
            while True:
                chunk = await self._screen.receive_some(4096)
                if not chunk:
                    break
                self.output += chunk.decode("utf-8", "replace")
        return self.output[self._seen :]

    async def type(self, keys: str) -> None:
        os.write(self.master_fd, keys.encode("utf-8"))
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await self._screen.aclose()
        for fd in (self.master_fd, self.slave_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
