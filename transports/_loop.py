"""The loop a client or a server runs on, looked up once: its clock, ``Event``, ``CancelScope``.

anyio finds the running backend again on every ``anyio.current_time()``,
``anyio.Event()`` and ``anyio.CancelScope()`` (sniffio, then a table), and a call
made about a dozen of them.  A client, a host or an endpoint lives on one loop, so
it looks once, when it is made or starts serving (inside that loop), and keeps
what it found in a :class:`LoopTools`:

* ``now``: the loop's clock, the same value as ``anyio.current_time()`` (trio's
  ``current_time``; asyncio's ``loop.time``);
* ``event`` and ``cancel_scope``: the backend's own classes of ``anyio.Event`` and
  ``anyio.CancelScope`` (what anyio's factories return), built directly;
* ``wait_readable`` and ``checkpoint``: trio's own on trio (what anyio calls
  there), anyio's elsewhere.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel

__all__ = ["LoopTools"]


class LoopTools:
    """What a client uses of its loop on every call (see the module docstring); made
    inside the loop that runs the client."""

    __slots__ = ("cancel_scope", "checkpoint", "event", "now", "wait_readable")

    def __init__(self) -> None:
        self.event: Callable[[], anyio.Event] = type(anyio.Event())
        self.cancel_scope: Callable[..., anyio.CancelScope] = type(anyio.CancelScope())
        trio: Any = sys.modules.get("trio")
        if trio is not None and trio.lowlevel.in_trio_run() and not _in_asyncio():
            self.now: Callable[[], float] = trio.current_time
            self.wait_readable: Callable[[int], Awaitable[None]] = trio.lowlevel.wait_readable
            self.checkpoint: Callable[[], Awaitable[None]] = trio.lowlevel.checkpoint
            return
        try:
            self.now = asyncio.get_running_loop().time
        except RuntimeError:  # another loop anyio runs on: ask it every time
            self.now = anyio.current_time
        self.wait_readable = anyio.wait_readable
        self.checkpoint = anyio.lowlevel.checkpoint


def _in_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
