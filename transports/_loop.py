"""The loop a client or a server runs on, looked up once: its clock, ``Event``, ``CancelScope``.

anyio finds the running backend again on every ``anyio.current_time()``,
``anyio.Event()`` and ``anyio.CancelScope()`` (sniffio, then a table), and a call
made about a dozen of them.  A client, a host or an endpoint lives on one loop, so
it looks once, when it is made or starts serving (inside that loop), and keeps
what it found in a :class:`LoopTools`:

* ``now``: the loop's clock, the same value as ``anyio.current_time()`` (trio's
  ``current_time``; asyncio's ``loop.time``);
* ``event`` and ``cancel_scope``: on trio, trio's own ``Event`` and ``CancelScope``
  (what anyio's wrap there: the same methods, one layer less); elsewhere the
  backend's own classes of ``anyio.Event`` and ``anyio.CancelScope`` (what anyio's
  factories return), built directly;
* ``wait_readable`` and ``checkpoint``: trio's own on trio (what anyio calls
  there), anyio's elsewhere;
* ``spawn(task_group, fn, *args)``: ``task_group.start_soon(fn, *args)``; on trio
  straight into the trio nursery under the anyio task group, skipping the task
  handle (a cancel scope and an event) anyio makes for every task, which nothing
  here reads: a client starts a task per HTTP request.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

__all__ = ["LoopTools"]


class LoopTools:
    """What a client uses of its loop on every call (see the module docstring); made
    inside the loop that runs the client."""

    __slots__ = ("cancel_scope", "checkpoint", "event", "now", "spawn", "wait_readable")

    def __init__(self) -> None:
        trio: Any = sys.modules.get("trio")
        if trio is not None and trio.lowlevel.in_trio_run() and not _in_asyncio():
            # (Duck-typed: trio's classes have every method of anyio's that we call.)
            self.event: Callable[[], anyio.Event] = trio.Event
            self.cancel_scope: Callable[..., anyio.CancelScope] = trio.CancelScope
            self.now: Callable[[], float] = trio.current_time
            self.wait_readable: Callable[[int], Awaitable[None]] = trio.lowlevel.wait_readable
            self.checkpoint: Callable[[], Awaitable[None]] = trio.lowlevel.checkpoint
            self.spawn: Callable[..., None] = _spawn_in_nursery
            return
        self.event = type(anyio.Event())
        self.cancel_scope = type(anyio.CancelScope())
        self.spawn = _start_soon
        try:
            self.now = asyncio.get_running_loop().time
        except RuntimeError:  # another loop anyio runs on: ask it every time
            self.now = anyio.current_time
        self.wait_readable = anyio.wait_readable
        self.checkpoint = anyio.lowlevel.checkpoint


def _start_soon(
    task_group: TaskGroup, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any
) -> None:
    task_group.start_soon(fn, *args)


def _spawn_in_nursery(
    task_group: TaskGroup, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any
) -> None:
    """On trio: the nursery anyio's task group wraps (cancelled with it, its errors
    raised from it: the same task as ``start_soon``'s, without its handle); a task
    group of another kind (or of an anyio that keeps its nursery elsewhere) gets
    ``start_soon``."""
    nursery = getattr(task_group, "_nursery", None)
    if nursery is None:
        task_group.start_soon(fn, *args)
    else:
        nursery.start_soon(fn, *args)


def _in_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
