"""Tasks (SEP-2663) on the client side: a task polled to its end, and the handle that holds one.

The model: when a ``tools/call`` that declared ``io.modelcontextprotocol/tasks`` is
answered with a task (``resultType: "task"``), the round engine ends its MRTR phase
and the client polls the task.  The rules of that are the core's
:class:`mrtr_core.tasks.TaskPoller`; :class:`TaskRun` only connects it to the loop:

* each ``SendTaskRequest`` goes out as a plain request of the client's
  (``tasks/get`` after its delay, ``tasks/update`` at once; over HTTP each carries
  ``Mcp-Name: <taskId>``, the core's header rule), its ``_meta`` declaring the
  extension (the server refuses the task methods to a request that does not);
* each ask (``DispatchInput``) goes to the client's
  :class:`~mrtr_transports.client.inputs.InputHandler`, the same one MRTR rounds
  use, in a task of its own (entered in the server's order); ``CancelInputs``
  cancels it;
* the end is the call's: ``Done`` its result, ``Failed`` a ``CallError`` (the
  task's inlined error, or the server's protocol violation) or
  ``InputUnavailable``, ``TimedOut`` a ``CallTimeout``, a task the server
  cancelled :class:`~mrtr_transports.client.errors.TaskCancelled`.

Cancelling the caller (anyio cancellation, its ``timeout``) sends ``tasks/cancel``
before it ends: shielded, bounded by :data:`CANCEL_TIMEOUT`, best effort (an error
or no answer is logged, not raised).  A :class:`TaskHandle` is the same task held by
the caller: ``get``, ``answer``, ``cancel``, and ``result`` (a :class:`TaskRun`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

import mrtr_core as m
from mrtr_core._meta import META_CLIENT_CAPABILITIES
from mrtr_core.tasks import CreateTaskResult, DetailedTask, TaskPoller, TaskStatusChanged
from mrtr_core.tasks._gate import with_tasks

from .._loop import LoopTools
from .errors import (
    CallError,
    CallTimeout,
    ClientError,
    InputUnavailable,
    TaskCancelled,
)
from .flows import InOrder
from .inputs import InputHandler, answer_problem

__all__ = ["CANCEL_TIMEOUT", "TaskHandle", "TaskRun", "TaskStatusHandler", "task_meta"]

logger = logging.getLogger("mrtr.client")

#: Seconds the ``tasks/cancel`` of a call given up on may take (best effort).
CANCEL_TIMEOUT = 2.0

#: Told of each status change of a task: its id and the change.
TaskStatusHandler = Callable[[str, TaskStatusChanged], None]
#: Sends one plain request of the client: (method, params, timeout) -> its result.
SendRequest = Callable[[str, Mapping[str, Any], float | None], Awaitable[dict[str, Any]]]


def task_meta(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The ``_meta`` of a task request: the client's capabilities, declaring the extension."""
    return {META_CLIENT_CAPABILITIES: with_tasks(capabilities)}


class TaskRun:
    """One task polled to its end in the caller's task (see the module docstring)."""

    def __init__(
        self,
        poller: TaskPoller,
        *,
        send: SendRequest,
        answer: InputHandler | None,
        meta: Mapping[str, Any],
        loop: LoopTools,
        request_timeout: float | None = None,
        on_status: TaskStatusHandler | None = None,
    ) -> None:
        self.poller = poller
        self._send = send
        self._answer = answer
        self._meta = meta
        self._loop = loop
        self._request_timeout = request_timeout
        self._on_status = on_status
        self._wake = loop.event()
        self._inputs: dict[str, anyio.CancelScope] = {}
        self._in_order = InOrder(loop.event)
        self._cancel_sends: list[m.tasks.SendTaskRequest] = []
        #: The link's (or a request's) failure that ended the task, raised in its place.
        self._override: ClientError | None = None
        self._cause: BaseException | None = None  # an input handler's own exception
        self._outcome: Any = None

    # --- Driving ---------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        """Poll the task to its end: its result, or the error it ended with."""
        try:
            async with anyio.create_task_group() as tasks:
                if self.poller.deadline is not None:
                    tasks.start_soon(self._budget, self.poller.deadline)
                await self._drive(tasks)
                tasks.cancel_scope.cancel()
        except BaseException:
            if self._outcome is None:  # our caller gave up (cancelled): so do we
                self.poller.cancel(self._loop.now())
                self._take_cancels()
            with anyio.CancelScope(shield=True):
                await self._send_cancels()
            raise
        await self._send_cancels()
        return self._result()

    async def _drive(self, tasks: TaskGroup) -> None:
        poller = self.poller
        while True:
            event = poller.next_event()
            if isinstance(event, m.Wait):
                await self._wake.wait()
                self._wake = self._loop.event()
            elif isinstance(event, m.tasks.SendTaskRequest):
                method = event.request.method
                if method == "tasks/cancel":
                    self._cancel_sends.append(event)
                else:
                    tasks.start_soon(self._exchange, event)
            elif isinstance(event, TaskStatusChanged):
                if self._on_status is not None:
                    try:
                        self._on_status(poller.task_id, event)
                    except Exception:
                        logger.exception("the on_task_status callback failed")
            elif isinstance(event, m.engine.DispatchInput):
                self._dispatch(tasks, event)
            elif isinstance(event, m.engine.CancelInputs):
                for key in event.keys:
                    scope = self._inputs.pop(key, None)
                    if scope is not None:
                        scope.cancel()
            else:  # the end
                self._outcome = event
                for scope in self._inputs.values():
                    scope.cancel()
                return

    def _take_cancels(self) -> None:
        """The events the poller queued on a cancel from outside ``_drive``."""
        while not isinstance(event := self.poller.next_event(), m.Wait):
            if isinstance(event, m.tasks.SendTaskRequest):
                self._cancel_sends.append(event)

    async def _send_cancels(self) -> None:
        sends, self._cancel_sends = self._cancel_sends, []
        for event in sends:  # (one at most: the poller hands out one tasks/cancel)
            with anyio.move_on_after(CANCEL_TIMEOUT):
                try:
                    await self._send("tasks/cancel", self._params(event), CANCEL_TIMEOUT)
                except ClientError as exc:
                    logger.info("tasks/cancel of %s failed: %s", self.poller.task_id, exc)

    def _params(self, event: m.tasks.SendTaskRequest) -> dict[str, Any]:
        return event.request.to_params(self._meta)

    def _live(self) -> bool:
        return self.poller.state in (
            m.engine.EngineState.AWAITING_RESULT,
            m.engine.EngineState.AWAITING_INPUT,
        )

    def _woken(self) -> None:
        self._wake.set()

    def _failed(self, error: ClientError) -> None:
        """A request of the task failed without an answer (the link, a timeout): the task
        is given up (cancelled, best effort) and the call raises ``error``."""
        if self._live():
            self._override = error
            self.poller.cancel(self._loop.now())
        self._woken()

    async def _exchange(self, event: m.tasks.SendTaskRequest) -> None:
        """A ``tasks/get`` (after its delay) or a ``tasks/update``, its answer fed back."""
        if event.delay > 0:
            await anyio.sleep(event.delay)
        if not self._live():
            return
        method = event.request.method
        try:
            result = await self._send(method, self._params(event), self._request_timeout)
        except CallError as exc:
            if self._live():
                error = m.ErrorObject(code=exc.code, message=exc.message, data=exc.data)
                self.poller.receive_error(error, self._loop.now())
            self._woken()
            return
        except CallTimeout as exc:  # (the request's own bound: a leg of the call's)
            self._failed(CallTimeout(exc.elapsed, exc.budget, "leg"))
            return
        except ClientError as exc:
            self._failed(exc)
            return
        if method == "tasks/get" and self._live():
            self.poller.receive_result(result, self._loop.now())
        self._woken()

    async def _budget(self, deadline: float) -> None:
        await anyio.sleep(max(deadline - self._loop.now(), 0.0))
        if self._live():
            self.poller.timed_out(self._loop.now())
        self._woken()

    # --- Asks ------------------------------------------------------------------------

    def _dispatch(self, tasks: TaskGroup, event: m.engine.DispatchInput) -> None:
        if event.key not in self.poller.pending_keys:
            return  # withdrawn, or the task ended, since this was queued
        if self._answer is None:
            self.poller.fail(event.key, "this client has no input handler")
            return
        scope = self._inputs[event.key] = self._loop.cancel_scope()
        before, mine = self._in_order.turn()
        tasks.start_soon(self._run_input, event.key, event.request, scope, before, mine)

    async def _run_input(
        self,
        key: str,
        request: m.wire.InputRequest,
        scope: anyio.CancelScope,
        before: anyio.Event | None,
        mine: anyio.Event,
    ) -> None:
        answer_input = self._answer
        assert answer_input is not None
        with scope:
            await InOrder.enter(before, mine)
            try:
                try:
                    answering = answer_input(key, request)
                finally:
                    mine.set()
                answer = await answering
            except InputUnavailable as exc:
                self._input_failed(key, exc.reason)
                return
            except Exception as exc:
                self._cause = exc
                self._input_failed(key, f"the input handler failed: {exc!r}")
                return
            problem = answer_problem(request, answer)
            if problem is not None:
                self._input_failed(key, problem)
                return
            self._inputs.pop(key, None)
            if key in self.poller.pending_keys:
                self.poller.provide(key, answer, self._loop.now())
                self._woken()

    def _input_failed(self, key: str, reason: str) -> None:
        self._inputs.pop(key, None)
        if key in self.poller.pending_keys:
            self.poller.fail(key, reason)
            self._woken()

    # --- The outcome -------------------------------------------------------------------

    def _result(self) -> dict[str, Any]:
        outcome = self._outcome
        if isinstance(outcome, m.engine.Done):
            return dict(outcome.result)
        if isinstance(outcome, m.engine.TimedOut):
            raise CallTimeout(outcome.elapsed, outcome.budget, "total")
        if isinstance(outcome, m.engine.Failed):
            error = outcome.error
            if isinstance(error, m.engine.InputFailed):
                raise InputUnavailable(error.reason, key=error.key) from self._cause
            raise CallError(error.code, error.message, error.data)
        if self._override is not None:
            raise self._override
        task = self.poller.task
        raise TaskCancelled(self.poller.task_id, task.status_message)


class TaskHandle:
    """A task the caller holds (``Client.call_task``, ``Client.task``).

    ``task_id`` is ``None`` when the server answered without a task: the handle is
    then complete, and :meth:`result` returns that result at once.  ``created`` is the
    ``CreateTaskResult`` (``None`` for a task taken up again by its id).
    """

    def __init__(
        self,
        *,
        task_id: str | None,
        created: CreateTaskResult | None = None,
        result: Mapping[str, Any] | None = None,
        send: SendRequest,
        answer: InputHandler | None,
        capabilities: Mapping[str, Any],
        loop: LoopTools,
        poll_bounds: tuple[float, float] = (
            m.tasks._poll.DEFAULT_MIN_INTERVAL,
            m.tasks._poll.DEFAULT_MAX_INTERVAL,
        ),
    ) -> None:
        self.task_id = task_id
        self._poll_bounds = poll_bounds
        self.created = created
        self._result = dict(result) if result is not None else None
        self._send = send
        self._answer = answer
        self._capabilities = capabilities
        self._meta = task_meta(capabilities)
        self._loop = loop
        #: Keys answered through this handle (:meth:`answer`, :meth:`result`); persist
        #: them with the task id so that a task taken up again never asks them twice.
        self.answered: set[str] = set()

    @property
    def complete(self) -> bool:
        """The server answered without a task: :meth:`result` has it already."""
        return self.task_id is None

    def _id(self, what: str) -> str:
        if self.task_id is None:
            raise ClientError(f"no task to {what}: the server answered without one")
        return self.task_id

    def _params(self, method: str, answers: Mapping[str, Any] | None = None) -> dict[str, Any]:
        request = m.tasks.TaskRequest(
            method=method, task_id=self._id(method), input_responses=answers
        )
        return request.to_params(self._meta)

    async def get(self, *, timeout: float | None = None) -> DetailedTask:
        """``tasks/get``: the task as the server reports it now (``CallError`` for a
        reply that is not a task: -32603)."""
        raw = await self._send("tasks/get", self._params("tasks/get"), timeout)
        try:
            task = DetailedTask.from_result(raw)
        except m.RemoteProtocolError as exc:
            raise CallError(m.ErrorCode.INTERNAL_ERROR, f"invalid tasks/get result: {exc}") from exc
        if task.task_id != self.task_id:
            raise CallError(
                m.ErrorCode.INTERNAL_ERROR,
                f"tasks/get answered for task {task.task_id!r}, not {self.task_id!r}",
            )
        return task

    async def answer(
        self,
        responses: Mapping[str, m.wire.InputResponse | Mapping[str, Any]],
        *,
        timeout: float | None = None,
    ) -> None:
        """``tasks/update`` with ``responses`` (by the keys of the task's asks)."""
        try:
            params = self._params("tasks/update", responses)
        except m.LocalProtocolError as exc:
            raise ClientError(f"cannot send tasks/update: {exc}") from exc
        await self._send("tasks/update", params, timeout)
        self.answered.update(responses)

    async def cancel(self, *, timeout: float | None = None) -> None:
        """``tasks/cancel`` (the server acknowledges; the task's status says the rest)."""
        await self._send("tasks/cancel", self._params("tasks/cancel"), timeout)

    async def result(
        self,
        *,
        timeout: float | None = None,
        request_timeout: float | None = None,
        on_status: TaskStatusHandler | None = None,
    ) -> dict[str, Any]:
        """Poll the task to its end, answering its asks with the client's handler, as
        ``Client.call`` does: its result, or ``CallError``, ``CallTimeout``,
        ``InputUnavailable``, ``TaskCancelled``, ``TransportError``.  ``timeout``
        bounds it (then the task is cancelled); cancelling the caller cancels it too.
        The poll interval is clamped to the client's ``task_poll_bounds``."""
        if self._result is not None:
            return dict(self._result)
        started = self._loop.now()
        task: CreateTaskResult | DetailedTask
        if self.created is not None:
            task = self.created
        else:
            task = await self.get(timeout=request_timeout)
        budget = None if timeout is None else max(timeout - (self._loop.now() - started), 1e-6)
        return await drive(
            task,
            send=self._send,
            answer=self._answer,
            capabilities=self._capabilities,
            loop=self._loop,
            timeout=budget,
            request_timeout=request_timeout,
            on_status=on_status,
            answered=self.answered,
            min_interval=self._poll_bounds[0],
            max_interval=self._poll_bounds[1],
        )


async def drive(
    task: CreateTaskResult | DetailedTask,
    *,
    send: SendRequest,
    answer: InputHandler | None,
    capabilities: Mapping[str, Any],
    loop: LoopTools,
    timeout: float | None = None,
    request_timeout: float | None = None,
    on_status: TaskStatusHandler | None = None,
    answered: set[str] | None = None,
    min_interval: float = m.tasks._poll.DEFAULT_MIN_INTERVAL,
    max_interval: float = m.tasks._poll.DEFAULT_MAX_INTERVAL,
) -> dict[str, Any]:
    """Poll ``task`` to its end (a :class:`TaskRun`); the keys it answers are added to
    ``answered``."""
    known: Iterable[str] = answered if answered is not None else ()
    poller = TaskPoller(
        task,
        loop.now(),
        capabilities=capabilities,
        timeout=timeout,
        min_interval=min_interval,
        max_interval=max_interval,
        answered=known,
    )
    run = TaskRun(
        poller,
        send=send,
        answer=answer,
        meta=task_meta(capabilities),
        loop=loop,
        request_timeout=request_timeout,
        on_status=on_status,
    )
    try:
        return await run.run()
    finally:
        if answered is not None:
            answered.update(poller.answered_keys)
