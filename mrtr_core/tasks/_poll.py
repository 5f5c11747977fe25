"""The client's side of a task: a polling engine, time in and events out.

A :class:`TaskPoller` is made from the task a ``tools/call`` answered with (a
:class:`CreateTaskResult`) or, to take a persisted task up again, from a
``tasks/get`` of it (a :class:`DetailedTask`).  Like the round engine it does no
I/O and reads no clock: the caller feeds it the ``tasks/get`` results, the app's
answers and the time, and it hands out what to send (:class:`SendTaskRequest`:
a ``tasks/get`` after the poll interval, a ``tasks/update`` per answer, one
``tasks/cancel``), what to ask the app (the round engine's ``DispatchInput`` and
``CancelInputs``), the task's status changes (:class:`TaskStatusChanged`) and
the end (the round engine's ``Done``, ``Failed``, ``TimedOut``, ``Cancelled``).

It trusts nothing the server says: a ``tasks/get`` answered for another task,
a result that is not a DetailedTask, a terminal status that changes, more than
``max_input_requests`` asks in one poll or out at once, more than ``max_asks``
over the task's life, an ask beyond the client's declared
capabilities, each ends the poller with ``Failed`` (after a ``tasks/cancel``:
the client abandons the task, and says so).  The caller's ``timeout`` bounds the
whole task.  An ask is handed out once for the task's life (the SEP keeps keys
unique per task, and a poll repeats what is outstanding); the asks still out when
the task ends are withdrawn (``CancelInputs``).

Its states are the round engine's (``EngineState``): ``AWAITING_RESULT`` while a
``tasks/get`` is out and no ask is, ``AWAITING_INPUT`` while asks are out too
(polling goes on: the server may move on, cancel, or end the task meanwhile).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Final, NoReturn

import attrs

from .._errors import (
    INTERNAL_ERROR,
    InputFailed,
    LocalProtocolError,
    MissingCapability,
    MrtrError,
    PeerError,
    RemoteProtocolError,
    describe,
)
from .._wait import FINISHED, NEED_INPUT, NEED_RESULT, Wait
from ..engine._events import (
    CancelInputs,
    Cancelled,
    DispatchInput,
    Done,
    Failed,
    TimedOut,
)
from ..engine._rounds import answer_problem
from ..engine._state import EngineState
from ..wire._capabilities import missing_capability
from ..wire._convert import unstructure_input_response
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import ErrorObject, InputRequest, InputResponse
from ._status import TERMINAL_STATUSES, TaskStatus
from ._wire import CreateTaskResult, DetailedTask, TaskRequest

#: The poll interval when the server names none, in seconds.
DEFAULT_POLL_INTERVAL: Final = 1.0
#: The floor and the ceiling a server's ``pollIntervalMs`` is clamped to, by default.
DEFAULT_MIN_INTERVAL: Final = 0.1
DEFAULT_MAX_INTERVAL: Final = 30.0
#: Asks one ``tasks/get`` may carry, and asks out at once (each may be a prompt, a
#: model call, a task of the client's).
DEFAULT_MAX_INPUT_REQUESTS: Final = 32
#: Asks over a task's life (their keys are kept, so none is asked twice).
DEFAULT_MAX_ASKS: Final = 1000


@attrs.frozen(kw_only=True)
class SendTaskRequest:
    """Send ``request`` (its ``method``: ``tasks/get``, ``tasks/update`` or
    ``tasks/cancel``; its params: ``request.to_params(meta)``) after ``delay`` seconds.

    A ``tasks/get``'s result goes back in with ``receive_result``; the acks of
    ``tasks/update`` and ``tasks/cancel`` need not (an error to a ``tasks/update``
    goes in with ``receive_error``).  A ``tasks/cancel`` is handed out once, just
    before the end; send it even though the poller has ended (best effort).
    """

    request: TaskRequest
    delay: float = 0.0


@attrs.frozen(kw_only=True)
class TaskStatusChanged:
    """The task's ``status`` or ``status_message`` is not what it was (the first one
    is handed out at once); ``poll`` counts the ``tasks/get`` results read (0: the
    task the poller was made from)."""

    status: TaskStatus
    status_message: str | None
    poll: int


class _PollInput:
    """What moves a poller (the table's second column)."""

    RESULT = "receive_result"
    ERROR = "receive_error"
    PROVIDE = "provide"
    FAIL = "fail"
    TIME_OUT = "timed_out"
    CANCEL = "cancel"


_S = EngineState
_I = _PollInput
_LIVE = (_S.AWAITING_RESULT, _S.AWAITING_INPUT)
_ENDS = frozenset({_S.DONE, _S.FAILED, _S.TIMED_OUT, _S.CANCELLED, _S.ERROR})
_AFTER_RESULT = frozenset({*_LIVE, _S.DONE, _S.FAILED, _S.TIMED_OUT, _S.CANCELLED})

#: (state, input) -> the states it may lead to; a pair that is absent is misuse.
TRANSITIONS: Final[Mapping[tuple[EngineState, str], frozenset[EngineState]]] = {
    **{(state, _I.RESULT): _AFTER_RESULT for state in _LIVE},
    **{(state, _I.ERROR): frozenset({_S.FAILED}) for state in _LIVE},
    **{(state, _I.TIME_OUT): frozenset({_S.TIMED_OUT}) for state in _LIVE},
    **{(state, _I.CANCEL): frozenset({_S.CANCELLED}) for state in _LIVE},
    # only an ask that is out can be answered, or fail
    (_S.AWAITING_INPUT, _I.PROVIDE): frozenset(_LIVE),
    (_S.AWAITING_INPUT, _I.FAIL): frozenset({_S.FAILED}),
    # cancelling a finished task is a harmless race: nothing is sent
    **{(state, _I.CANCEL): frozenset({state}) for state in _ENDS},
}

PollEvent = (
    SendTaskRequest
    | TaskStatusChanged
    | DispatchInput
    | CancelInputs
    | Done
    | Failed
    | TimedOut
    | Cancelled
)


def _check_seconds(name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise LocalProtocolError(f"{name} must be a positive number, not {describe(value)}")


class TaskPoller:
    """Polls one task to its end.  See the module docstring and ``docs/engine.md``.

    ``task`` is the ``CreateTaskResult`` (the first ``tasks/get`` goes out after the
    poll interval) or a ``DetailedTask`` just read (to resume a task: what it carries
    is acted on at once).  ``now`` is the caller's clock, in seconds, as every ``now``
    after it.  The server's ``pollIntervalMs`` (else :data:`DEFAULT_POLL_INTERVAL`)
    is clamped to ``min_interval``..``max_interval`` seconds.  ``timeout`` bounds the
    task from ``now`` (``None``: no bound; arm a timer at :attr:`deadline` and call
    :meth:`timed_out`).  ``capabilities`` are the client's, which every ask must be
    within; ``answered`` names keys already answered (by hand, or before a restart):
    they are never handed out.
    """

    def __init__(
        self,
        task: CreateTaskResult | DetailedTask,
        now: float,
        *,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        min_interval: float = DEFAULT_MIN_INTERVAL,
        max_interval: float = DEFAULT_MAX_INTERVAL,
        max_input_requests: int = DEFAULT_MAX_INPUT_REQUESTS,
        max_asks: int = DEFAULT_MAX_ASKS,
        answered: Iterable[str] = (),
        input_kinds: InputRegistry = INPUT_KINDS,
    ) -> None:
        if not isinstance(task, (CreateTaskResult, DetailedTask)):
            raise LocalProtocolError("task must be a CreateTaskResult or a DetailedTask")
        _check_seconds("timeout", timeout, optional=True)
        _check_seconds("min_interval", min_interval)
        _check_seconds("max_interval", max_interval)
        if max_interval < min_interval:
            raise LocalProtocolError("max_interval must not be below min_interval")
        for name, bound in (("max_input_requests", max_input_requests), ("max_asks", max_asks)):
            if not isinstance(bound, int) or isinstance(bound, bool) or bound < 1:
                raise LocalProtocolError(f"{name} must be a positive int")
        if capabilities is not None and not isinstance(capabilities, Mapping):
            raise LocalProtocolError("capabilities must be a mapping")
        self.task_id = task.task_id
        self.capabilities: Mapping[str, Any] = capabilities if capabilities is not None else {}
        self.timeout = timeout
        self.min_interval = min_interval
        self.max_interval = max_interval
        self.max_input_requests = max_input_requests
        self.max_asks = max_asks
        self.input_kinds = input_kinds
        self._started_at = now
        #: When the caller's budget runs out (``None``: never).
        self.deadline = None if timeout is None else now + timeout
        self.state = EngineState.AWAITING_RESULT
        #: The task as last read (the ``CreateTaskResult`` until the first poll).
        self.task: CreateTaskResult | DetailedTask = task
        #: Its last known status (the server's: a task the caller cancelled keeps its own).
        self.status: TaskStatus = task.status
        #: ``tasks/get`` results read.
        self.polls = 0
        #: The poll interval in force, in seconds.
        self.interval = self._interval_of(task)
        self._events: deque[PollEvent] = deque()
        self._pending: dict[str, InputRequest] = {}
        self._answered: set[str] = {key for key in answered if isinstance(key, str)}
        self._events.append(
            TaskStatusChanged(status=task.status, status_message=task.status_message, poll=0)
        )
        if isinstance(task, DetailedTask):
            self._read(task, now)
        else:
            self._poll_later()

    # --- Reading the poller ---------------------------------------------------------

    def next_event(self) -> PollEvent | Wait:
        """The next queued event, or what the poller waits for (:class:`Wait`)."""
        if self._events:
            return self._events.popleft()
        if self.state in _ENDS:
            return FINISHED
        return NEED_INPUT if self.state is EngineState.AWAITING_INPUT else NEED_RESULT

    @property
    def pending_keys(self) -> tuple[str, ...]:
        """The asks handed out and not yet answered."""
        return tuple(self._pending)

    @property
    def answered_keys(self) -> frozenset[str]:
        """The keys answered over the task's life (persist them with the task id)."""
        return frozenset(self._answered)

    # --- Inputs ---------------------------------------------------------------------

    def receive_result(self, result: Mapping[str, Any], now: float) -> None:
        """The result of the ``tasks/get`` handed out last (the plain result mapping)."""
        self._enter(_I.RESULT)
        asks = result.get("inputRequests") if isinstance(result, Mapping) else None
        if isinstance(asks, Mapping) and len(asks) > self.max_input_requests:
            # (before reading them: a huge inputRequests costs nothing to refuse)
            self._abandon(
                self._too_many(f"{len(asks)} questions in one poll", self.max_input_requests)
            )
            return
        try:
            task = DetailedTask.from_result(result)
        except RemoteProtocolError as exc:
            self._abandon(
                RemoteProtocolError(f"invalid tasks/get result: {exc.message}", code=INTERNAL_ERROR)
            )
            return
        self.polls += 1
        self._read(task, now)

    def receive_error(self, error: ErrorObject | Mapping[str, Any], now: float) -> None:
        """A ``tasks/get`` or ``tasks/update`` was answered with a JSON-RPC error (an
        unknown task, -32602, among them): the poller fails with it."""
        self._enter(_I.ERROR)
        if isinstance(error, ErrorObject):
            peer = PeerError(error.code, error.message, error.data)
        elif isinstance(error, Mapping):
            code, message = error.get("code"), error.get("message")
            peer = PeerError(
                code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
                message if isinstance(message, str) else "",
                error.get("data"),
            )
        else:
            self._misuse("error must be an ErrorObject or a mapping")
        self._withdraw_all()
        self._finish(EngineState.FAILED, Failed(error=peer))

    def provide(self, key: str, response: InputResponse | Mapping[str, Any], now: float) -> None:
        """The app's answer to ``key``: queues its ``tasks/update``."""
        self._enter(_I.PROVIDE)
        request = self._pending.get(key) if isinstance(key, str) else None
        if request is None:
            self._misuse(f"{describe(key)} is not an ask waiting for an answer")
        problem = answer_problem(key, request, response, self.input_kinds)
        if problem is not None:
            self._misuse(problem)
        if self._past_deadline(now):
            self.timed_out(now)  # (too late: the answer is dropped, the task cancelled)
            return
        del self._pending[key]
        self._answered.add(key)
        answer = {key: unstructure_input_response(response)}
        self._events.append(
            SendTaskRequest(
                request=TaskRequest(
                    method="tasks/update", task_id=self.task_id, input_responses=answer
                )
            )
        )
        if not self._pending:
            self.state = EngineState.AWAITING_RESULT

    def fail(self, key: str, reason: str) -> None:
        """The app cannot answer ``key``: the task is abandoned (cancelled) and the poller
        fails with ``InputFailed``."""
        self._enter(_I.FAIL)
        if not isinstance(key, str) or key not in self._pending:
            self._misuse(f"{describe(key)} is not an ask waiting for an answer")
        self._abandon(InputFailed(key, str(reason)))

    def timed_out(self, now: float) -> None:
        """The caller's budget ran out (its timer, at :attr:`deadline`): the task is
        cancelled and the poller ends with ``TimedOut(limit="total")``."""
        self._enter(_I.TIME_OUT)
        self._withdraw_all()
        self._send_cancel()
        elapsed = now - self._started_at
        self._finish(
            EngineState.TIMED_OUT, TimedOut(elapsed=elapsed, budget=self.timeout, limit="total")
        )

    def cancel(self, now: float | None = None) -> None:
        """Cancel the task: ``CancelInputs`` for the asks out, its ``tasks/cancel``,
        ``Cancelled``.  A no-op once the poller has ended."""
        before = self.state
        self._enter(_I.CANCEL)
        if before in _ENDS:
            return
        self._withdraw_all()
        self._send_cancel()
        self._finish(EngineState.CANCELLED, Cancelled())

    # --- Internals ------------------------------------------------------------------

    def _enter(self, given: str) -> None:
        if (self.state, given) not in TRANSITIONS:
            self._misuse(f"{given}() is not allowed in state {self.state.value}")

    def _misuse(self, message: str) -> NoReturn:
        if self.state not in _ENDS:
            self.state = EngineState.ERROR
        raise LocalProtocolError(message)

    def _finish(self, state: EngineState, event: PollEvent) -> None:
        self.state = state
        self._events.append(event)

    def _past_deadline(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline

    def _interval_of(self, task: CreateTaskResult | DetailedTask) -> float:
        wanted = task.poll_interval_ms
        seconds = DEFAULT_POLL_INTERVAL if wanted is None else wanted / 1000
        return min(max(seconds, self.min_interval), self.max_interval)

    def _poll_later(self) -> None:
        get = TaskRequest(method="tasks/get", task_id=self.task_id)
        self._events.append(SendTaskRequest(request=get, delay=self.interval))

    def _send_cancel(self) -> None:
        # (once: the poller ends right after, and an ended poller sends nothing)
        cancel = TaskRequest(method="tasks/cancel", task_id=self.task_id)
        self._events.append(SendTaskRequest(request=cancel))

    def _withdraw_all(self) -> None:
        """The task ended (or was given up): the asks still out are not wanted."""
        keys = tuple(self._pending)
        self._pending.clear()
        if keys:
            self._events.append(CancelInputs(keys=keys))

    def _too_many(self, what: str, bound: int) -> RemoteProtocolError:
        return RemoteProtocolError(
            f"task {describe(self.task_id)} asked {what} (at most {bound})", code=INTERNAL_ERROR
        )

    def _abandon(self, error: MrtrError) -> None:
        """The client gives the task up: its asks withdrawn, a ``tasks/cancel``, ``Failed``."""
        self._withdraw_all()
        self._send_cancel()
        self._finish(EngineState.FAILED, Failed(error=error))

    def _read(self, task: DetailedTask, now: float) -> None:
        """Act on the task as a poll (or the caller, resuming) read it."""
        if task.task_id != self.task_id:
            self._abandon(
                RemoteProtocolError(
                    f"tasks/get answered for task {describe(task.task_id)}, "
                    f"not {describe(self.task_id)}",
                    code=INTERNAL_ERROR,
                )
            )
            return
        if self.status in TERMINAL_STATUSES and task.status != self.status:
            self._abandon(
                RemoteProtocolError(
                    f"task {describe(self.task_id)} went from {self.status} to {task.status}: "
                    "a terminal status never changes",
                    code=INTERNAL_ERROR,
                )
            )
            return
        if self._past_deadline(now):
            self.timed_out(now)
            return
        before = self.task
        self.task = task
        if task.status != before.status or task.status_message != before.status_message:
            self._events.append(
                TaskStatusChanged(
                    status=task.status, status_message=task.status_message, poll=self.polls
                )
            )
        self.status = task.status
        self.interval = self._interval_of(task)
        if task.status == "completed":
            assert task.result is not None  # (DetailedTask: a completed task carries it)
            kind = task.result.get("resultType", "complete")
            if kind != "complete":  # (what the request would have returned: a complete one)
                self._abandon(
                    RemoteProtocolError(
                        f"task {describe(self.task_id)} completed with a result of resultType "
                        f"{describe(kind)}",
                        code=INTERNAL_ERROR,
                    )
                )
                return
            self._withdraw_all()
            self._finish(EngineState.DONE, Done(result=task.result))
        elif task.status == "failed":
            assert task.error is not None
            error = task.error
            self._withdraw_all()
            self._finish(
                EngineState.FAILED, Failed(error=PeerError(error.code, error.message, error.data))
            )
        elif task.status == "cancelled":
            self._withdraw_all()
            self._finish(EngineState.CANCELLED, Cancelled())
        else:
            self._take_asks(task.input_requests or {})

    def _take_asks(self, asks: Mapping[str, InputRequest]) -> None:
        """Hand out what is newly asked, poll again.

        An ask handed out stays out until it is answered or the task ends, even when a
        poll no longer lists it: a poll may read a lagging replica (the SEP's eventual
        consistency), and withdrawing it there would ask the person twice when the next
        poll lists it again.  An answer to an ask the server superseded meanwhile is
        harmless: the server ignores it (the SEP says so).
        """
        fresh = [
            (key, request)
            for key, request in asks.items()
            if key not in self._pending and key not in self._answered
        ]
        out = len(self._pending) + len(fresh)
        if out > self.max_input_requests:
            self._abandon(self._too_many(f"{out} questions out at once", self.max_input_requests))
            return
        if len(self._answered) + out > self.max_asks:
            self._abandon(self._too_many("more questions over its life", self.max_asks))
            return
        for key, request in fresh:
            required = missing_capability(request, self.capabilities, self.input_kinds)
            if required:
                self._abandon(
                    MissingCapability(
                        f"task ask {describe(key)} ({request.method}) needs an undeclared "
                        f"capability: {required}",
                        key=key,
                        method=request.method,
                        required=required,
                    )
                )
                return
        for key, request in fresh:
            self._pending[key] = request
            self._events.append(DispatchInput(key=key, request=request, round=self.polls))
        self.state = EngineState.AWAITING_INPUT if self._pending else EngineState.AWAITING_RESULT
        self._poll_later()
