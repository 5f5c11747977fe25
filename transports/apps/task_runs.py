"""Running a tool's work as a task (SEP-2663): ``return ctx.run_task(work, *args)``.

A tool registered with ``task="optional"`` or ``task="required"`` runs as an
ordinary leg first (it may ask by ``input_required`` rounds, as any tool), and
then hands the rest of its work to a task::

    @app.tool(task="optional")
    def export(ctx: Context, table: str) -> Any:
        return ctx.run_task(export_work, table)

    async def export_work(task: TaskContext, table: str) -> str:
        await task.status(f"exporting {table}")
        go = await task.wait_for_answer("go", CONFIRM)  # input_required, tasks/update
        ...
        return "done"

What the leg answers depends on the request (the SEP: the server decides per
request, and never sends a task to a request that did not declare the extension):

* declared (a 2026-07-28 request whose ``_meta`` capabilities name
  ``io.modelcontextprotocol/tasks``): a task is created in the app's store
  (``task_store``; findable by ``tasks/get`` before the answer goes out), ``work``
  starts detached from the request, and the ``tools/call`` answers the flat
  ``CreateTaskResult``;
* not declared (an ``"optional"`` tool; a ``"required"`` one was refused with
  -32021 before its handler ran): ``work`` runs inline, in this leg, and its
  outcome is the plain result, as a synchronous tool's (an exception is a tool
  error); a ``work`` that asks for input then fails with -32021 naming the
  extension: it can only ask through a task.

A task's outcome: a return value is shaped as a synchronous tool's
(``results.tool_result``, its output schema checked) and ``completed`` (a tool
error, ``isError: true``, included: ``return tool_error(...)``); an ``MrtrError`` is
``failed`` with that JSON-RPC error inlined; any other exception is ``failed`` with
-32603 and a clipped message (the traceback goes to the log, not the client);
``tasks/cancel`` cancels ``work`` (anyio cancellation) and the task settles to
``cancelled``; a result over the store's ``max_result_bytes`` fails it.  The work is
also cancelled at its TTL (the store's ``ttl``, on the loop's clock).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio
import attrs

import mrtr_core as m
from mrtr_core._errors import clip

from .continuations import _spawn_detached
from .waiting import WaitsForAnswers

if TYPE_CHECKING:
    from ..auth.identity import Identity
    from .context import Context
    from .task_store import TaskStore

log = logging.getLogger("mrtr.server")

#: How a tool may run: ``"optional"`` (a task when the request declared the extension,
#: inline otherwise) or ``"required"`` (-32021 to a request that did not declare it).
TaskSupport = Literal["optional", "required"]
TASK_SUPPORT: tuple[TaskSupport, ...] = ("optional", "required")


class TaskContext(WaitsForAnswers):
    """What a task's ``work`` gets: its id, its status message, and asking for input.

    ``task_id`` is ``None`` when the work runs inline (the request did not declare the
    tasks extension): then :meth:`status` does nothing and :meth:`wait_for` fails with
    -32021 naming the extension.
    """

    __slots__ = ("_capabilities", "_clock", "_store", "_what", "identity", "task_id")

    def __init__(
        self,
        task_id: str | None,
        store: TaskStore | None,
        clock: Callable[[], float],
        capabilities: Mapping[str, Any],
        what: str,
        identity: Identity | None = None,
    ) -> None:
        self.task_id = task_id
        #: The verified caller whose request started the task (``Context.identity``).
        self.identity = identity
        self._store = store
        self._clock = clock
        self._capabilities = capabilities
        self._what = what

    async def status(self, message: str) -> None:
        """Set the task's ``statusMessage`` (and ``lastUpdatedAt``)."""
        if not isinstance(message, str):
            raise TypeError(f"a status message is a string, not {type(message).__name__}")
        if self.task_id is not None and self._store is not None:
            await self._store.set_message(self.task_id, message, self._clock())

    async def wait_for(self, requests: Mapping[str, m.wire.InputRequest]) -> m.server.Answers:
        """Ask the client for ``requests`` (by key) through the task, and wait until every
        one is answered by ``tasks/update``: the task is ``input_required`` with them
        (and any other outstanding ones) meanwhile.  The answers, read as a leg's
        (``answers.get(key, asked)``, typed by the ask).

        Keys are unique over the task's lifetime, and at most the store's
        ``max_pending_inputs`` are outstanding at once (``LocalProtocolError``); an ask
        the creating request did not declare the capability for is -32021.
        """
        if self.task_id is None or self._store is None:
            m.tasks.require_tasks(None, f"asking for input in {self._what}'s work")
        asks = dict(requests)
        if not asks:
            raise m.LocalProtocolError("wait_for needs at least one input request")
        m.server.input_required(asks)  # (the builder's checks: keys and kinds)
        missing = m.server.required_capabilities(asks, self._capabilities)
        if missing:
            raise m.server.CapabilityRequired(missing)
        assert self.task_id is not None and self._store is not None
        await self._store.ask(self.task_id, asks, self._clock())
        raw = await self._store.wait_answers(self.task_id, frozenset(asks))
        # Proven: the store handed out only answers to what this task asked.
        proven = {key: m.wire.INPUT_KINDS.kind_for(ask).name for key, ask in asks.items()}
        return m.server.Answers({"inputResponses": raw}, proven=proven)


#: A task's work: ``async def work(task, *args, **kwargs)``, returning what a tool may.
TaskWork = Callable[..., Awaitable[Any]]


@attrs.frozen
class TaskHandoff:
    """What ``ctx.run_task(work, ...)`` returns: the leg hands ``work`` to a task."""

    work: TaskWork
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


async def start_task(
    ctx: Context,
    handoff: TaskHandoff,
    tool_name: str,
    shape: Callable[[Any], Mapping[str, Any]],
    on_error: Callable[[Exception], Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """The leg's answer for a handoff: the ``CreateTaskResult`` of a new task running
    ``work``, or (the request did not declare the extension) ``work``'s result."""
    app = ctx.app
    what = f"tool {tool_name!r}"
    info = ctx.info
    if info.era != "modern" or not m.tasks.declares_tasks(info.capabilities):
        inline = TaskContext(None, None, app.clock, info.capabilities, what, ctx.identity)
        try:
            value = await handoff.work(inline, *handoff.args, **handoff.kwargs)
        except m.MrtrError:
            raise
        except Exception as exc:
            if on_error is None:
                raise
            log.error("the work of %s raised", what, exc_info=True)
            return dict(on_error(exc))
        return dict(shape(value))
    store = app.tasks
    assert store is not None  # made when the tool was registered
    record = await store.create(principal=ctx.principal, client=ctx.client, now=app.clock())
    task = TaskContext(record.task_id, store, app.clock, info.capabilities, what, ctx.identity)
    _spawn_detached(_run(store, record.task_id, handoff, task, shape, app.clock, what))
    return record.created().to_result()


async def _run(
    store: TaskStore,
    task_id: str,
    handoff: TaskHandoff,
    task: TaskContext,
    shape: Callable[[Any], Mapping[str, Any]],
    clock: Callable[[], float],
    what: str,
) -> None:
    """Run the work to its outcome, and settle the task with it."""
    cancelled = False
    event: m.tasks.TaskEvent = "failed"
    result: dict[str, Any] | None = None
    error: m.ErrorObject | None = None
    with anyio.CancelScope(deadline=anyio.current_time() + store.ttl) as scope:

        def cancel() -> None:
            nonlocal cancelled
            cancelled = True
            scope.cancel()

        if not store.attach(task_id, cancel):
            return  # cancelled (or expired) before its work started: nothing to run
        try:
            value = await handoff.work(task, *handoff.args, **handoff.kwargs)
            event, result = "completed", dict(shape(value))
        except m.MrtrError as exc:
            error = m.ErrorObject(code=exc.code, message=exc.message, data=exc.data)
        except Exception as exc:  # a bug in the work must not take the server down
            log.error("the task work of %s raised", what, exc_info=True)
            error = m.ErrorObject(
                code=m.ErrorCode.INTERNAL_ERROR,
                message=f"the task failed: {clip(f'{type(exc).__name__}: {exc}')}",
            )
    store.attach(task_id, None)
    if cancelled:
        event, result, error = "cancel", None, None
    try:
        if scope.cancelled_caught and not cancelled:  # the loop's clock reached the TTL
            await store.expire(task_id, clock())
        else:
            await store.change(task_id, event, clock(), result=result, error=error)
    except Exception:  # (a store that failed: the task keeps its last status until its TTL)
        log.error("settling the task of %s failed", what, exc_info=True)


__all__ = ["TASK_SUPPORT", "TaskContext", "TaskHandoff", "TaskSupport", "TaskWork", "start_task"]
