"""How a command ends when it is asked to stop: Ctrl-C (SIGINT) and SIGTERM.

The model.  A signal is a request to stop, not a crash, so it never ends in a
traceback.  :func:`run_stoppable` runs a command's async main (on trio unless
told otherwise: ``anyio.run``'s backend, ``mrtr serve --loop``) with a watcher
for the signals the command honours: the first one cancels everything (so
``finally`` blocks, child shutdown and stdout restoring run as on any other
exit), and the command's exit code says which signal it was.  Signals that
arrive while that cleanup runs are absorbed: the cleanup is bounded by its
own timeouts (a stdio server child: close stdin, SIGTERM, SIGKILL), and cutting
it short could leave that child running.

Ctrl-C is exit :attr:`ExitCode.INTERRUPTED` (130, the shell's 128 + SIGINT)
with one line, ``PROG: interrupted``, on stderr.  SIGTERM (the way a service
manager, or a stdio client after closing stdin, asks a server to stop) is a
clean stop: exit 0 (not 143, so service managers count it as one) and
``PROG: terminated``.

A server stops gracefully (``on_stop``): the first signal does not cancel it
but asks it to stop taking new work and drain what is in flight (``mrtr serve
--drain-timeout``, which bounds the drain); its main then returns by itself.
A second signal while it drains cancels at once (Ctrl-C twice: "now").

trio raises a ``KeyboardInterrupt`` that arrives before the watcher is up (or
outside the run) inside an exception group when it passes through a
nursery, so :func:`is_interrupt` looks through groups.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, TextIO

import anyio
from anyio.abc import TaskStatus

from .exit_codes import ExitCode

__all__ = ["STOPPED_BY_SIGTERM", "interrupted", "is_interrupt", "run_stoppable"]

#: The exit code of a command that honours SIGTERM and was stopped by it: a clean stop.
STOPPED_BY_SIGTERM = ExitCode.RESULT


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``KeyboardInterrupt``, or a group (a task group's) holding one."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(KeyboardInterrupt) is not None
    return isinstance(exc, KeyboardInterrupt)


def interrupted(prog: str, stderr: TextIO | None = None) -> int:
    """Say ``PROG: interrupted`` on stderr; the exit code for Ctrl-C (130)."""
    return _say(prog, "interrupted", ExitCode.INTERRUPTED, stderr)


def run_stoppable(
    prog: str,
    main: Callable[[], Awaitable[int]],
    *,
    signals: Collection[signal.Signals] = (signal.SIGINT,),
    on_stop: Callable[[], object] | None = None,
    backend: str = "trio",
    backend_options: Mapping[str, Any] | None = None,
) -> int:
    """``anyio.run(main)``'s exit code, or the code of the signal in ``signals`` that stopped it.

    With ``on_stop``, the first signal calls it (from inside the run) instead of
    cancelling ``main``, and a second one cancels.  Only call from the main thread
    (signal handlers live there).
    """
    stopped_by: list[signal.Signals] = []

    async def watch(cancel: anyio.CancelScope, *, task_status: TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(*signals) as arrivals:
            task_status.started()
            async for signum in arrivals:  # (until the run ends: later ones are absorbed)
                if not stopped_by:
                    stopped_by.append(signal.Signals(signum))
                    if on_stop is None:
                        cancel.cancel()
                    else:
                        on_stop()  # main drains, then returns
                elif on_stop is not None:  # a second signal while draining: stop now
                    cancel.cancel()

    async def run() -> int:
        code = int(ExitCode.RESULT)
        async with anyio.create_task_group() as tasks:
            await tasks.start(watch, tasks.cancel_scope)
            code = await main()
            tasks.cancel_scope.cancel()
        return code

    try:
        code = anyio.run(run, backend=backend, backend_options=dict(backend_options or {}))
    except BaseException as exc:
        if not is_interrupt(exc):
            raise
        return interrupted(prog)
    if not stopped_by:
        return code
    if stopped_by[0] == signal.SIGINT:
        return interrupted(prog)
    return _say(prog, "terminated", STOPPED_BY_SIGTERM, None)


def _say(prog: str, what: str, code: int, stderr: TextIO | None) -> int:
    err = stderr or sys.stderr
    err.write(f"{prog}: {what}\n")
    err.flush()
    return code
