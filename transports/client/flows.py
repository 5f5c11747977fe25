"""One call of the client, from its first leg to its outcome: legs, timers, inputs.

The model: a call (``tools/call``, ``prompts/get``, ``resources/read``) is a
flow of the client connection's round engine.  :func:`run_flow` starts it
(``Connection.call`` with both round bounds, ``max_rounds`` and
``max_state_only_legs``) and waits for its end; in between the client's pump
hands every ``CallEvent`` of the call to its :class:`Flow`, which acts on it at
once:

* a leg (``SendRequest``, ``SendRetry``) goes to the link, after the retry's
  delay when the engine paces state-only legs, and arms the leg timer;
* ``RoundStarted`` arms the input timer; each ``DispatchInput`` starts a task
  that awaits the app's :class:`~mrtr_transports.client.inputs.InputHandler`,
  checks the answer and feeds ``provide`` (or ``fail_input``); ``CancelInputs``
  cancels the tasks whose answers are no longer wanted.  The handlers of one
  round are entered in the server's order (:class:`InOrder`: a loop starts new
  tasks in no fixed order), so a handler that asks a person one question at a
  time asks them as the server listed them, the same on every run;
* ``CancelLeg`` cancels the leg on the wire (stdio: a notification; HTTP:
  closing its stream);
* a terminal event ends the flow: :meth:`Flow.result` turns it into the
  result or the :mod:`~mrtr_transports.client.errors` error to raise.

Timers are the loop's (the client's clock, ``LoopTools.now``, fed back as ``now=``
and the ``*_timed_out`` inputs).  A flow's tasks (at most two timers, one delayed
leg, and one task per input key of the current round) run in the client's task
group, each under a cancel scope of the flow's: when the call ends, :func:`run_flow`
cancels them and waits until they have ended, as a task group of its own would,
without its pass of the run loop per call (a call that started no task, a plain
one-leg call, costs none).  The first input handler of a round usually needs no
task at all: the caller's task, idle until the call ends, runs it
(:meth:`Flow.wait_in_caller`), under its cancel scope all the same.  What a task
raises (a bug: input handlers' exceptions are caught) is raised by :func:`run_flow`,
never in the client's task group.

A plain request (``Client.request``: one leg, no rounds) is only a
:class:`Waiter` for its answer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup

import mrtr_core as m

from .._loop import LoopTools
from .errors import (
    CallError,
    CallTimeout,
    ClientError,
    InputUnavailable,
    RoundCapExceeded,
    TransportError,
)
from .inputs import InputHandler, answer_problem
from .link import Outbound
from .person_time import PersonTime, server_sleep

__all__ = ["CallLimits", "Flow", "FlowContext", "InOrder", "Waiter", "run_flow"]

logger = logging.getLogger("mrtr.client")

_TERMINAL = (m.engine.Done, m.engine.Failed, m.engine.TimedOut, m.engine.Cancelled)


class InOrder:
    """Enter handlers in the order they were handed out, though their tasks run in any.

    Each task takes a turn (:meth:`turn`) when it is spawned, in order, and
    calls :meth:`enter` before it calls its handler: that waits until the task
    before it has entered its own handler (and run it to its first pause), so
    whatever a handler does first (take a lock, print a question) happens in
    the order given.  A task cancelled while it waits still passes the turn on.
    """

    __slots__ = ("_event", "_last")

    def __init__(self, event: Callable[[], anyio.Event] = anyio.Event) -> None:
        self._event = event
        self._last: anyio.Event | None = None

    def turn(self) -> tuple[anyio.Event | None, anyio.Event]:
        """(the turn before this one, if still open; this one's): taken at spawn time."""
        before, self._last = self._last, self._event()
        return before, self._last

    @staticmethod
    async def enter(before: anyio.Event | None, mine: anyio.Event) -> None:
        """Wait for the turn ``before``; the caller sets ``mine`` as it enters its
        handler (here if it is cancelled while it waits)."""
        try:
            if before is not None:
                await before.wait()
        except BaseException:
            mine.set()
            raise


@dataclass(frozen=True, slots=True)
class CallLimits:
    """The bounds of one call (see ``Client.call``)."""

    timeout: float | None = None
    leg_timeout: float | None = None
    input_timeout: float | None = None
    max_rounds: int = 10
    max_state_only_legs: int = 10
    url_wait_timeout: float | None = m.engine._engine.DEFAULT_URL_WAIT


@dataclass(frozen=True, slots=True)
class FlowContext:
    """What a flow uses of its client."""

    conn: m.Connection
    #: Drain the connection's events (after every input to it).
    pump: Callable[[], None]
    #: Where the flows' tasks run (the client's task group; see the module docstring).
    task_group: TaskGroup
    #: Hand a message to the link (traced).
    send_out: Callable[[Outbound], None]
    #: An event through the connection, as the link's ``Outbound`` (kind, then fields).
    outbound: Callable[..., Outbound]
    #: Stop reading the answer to a request (HTTP: close its stream).
    close_stream: Callable[[m.RequestId], None]
    #: The link's failure, once it has failed.
    lost: Callable[[], TransportError | None]
    answer: InputHandler | None
    #: The loop's clock, events and cancel scopes (looked up once per client).
    loop: LoopTools
    #: The link's person at work (an OAuth sign-in), whose time the timers do not count.
    person: PersonTime | None = None


async def run_flow(
    ctx: FlowContext,
    flows: dict[int, Flow],
    method: str,
    params: Mapping[str, Any] | None,
    *,
    started: float,
    limits: CallLimits,
    on_progress: Callable[[m.Progress], None] | None,
    capabilities: Mapping[str, Any] | None,
    on_rounds: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run one call to its end (registered in ``flows`` meanwhile); its complete result.

    ``started`` is when the caller's whole-flow budget (``limits.timeout``) began;
    ``on_rounds`` is told the rounds it took (0: one leg, no retry) when it ends.
    """
    conn, now = ctx.conn, ctx.loop.now
    timeout = limits.timeout
    budget = None if timeout is None else timeout - (now() - started)
    if budget is not None and budget <= 0:
        raise CallTimeout(now() - started, timeout, "total")
    flow = Flow(ctx, now(), on_progress, limits.input_timeout)
    flow.total_budget, flow.total_started = timeout, started
    try:
        try:
            flow.call = conn.call(
                method,
                params,
                now=flow.started,
                progress=on_progress is not None,
                capabilities=capabilities,
                leg_timeout=limits.leg_timeout,
                total_timeout=budget,
                input_timeout=limits.input_timeout,
                max_rounds=limits.max_rounds,
                max_state_only_legs=limits.max_state_only_legs,
                url_wait_timeout=limits.url_wait_timeout,
            )
        except m.LocalProtocolError as exc:
            flow.override = ClientError(f"cannot start {method}: {exc}")
            flow.finished = True
        else:
            flows[flow.call] = flow
            if budget is not None:
                flow.spawn(flow.total_timer, budget)
            try:
                ctx.pump()
                await flow.wait_in_caller()
            finally:
                if not flow.finished:  # our caller gave up: cancel on the wire
                    conn.cancel(flow.call, now())
                    ctx.pump()
                flows.pop(flow.call, None)
    finally:
        await flow.end_tasks()
    if on_rounds is not None:
        on_rounds(flow.round)
    return flow.result()


class Flow:
    """The client's side of one call: its timers, input tasks and outcome."""

    __slots__ = (
        "answering",
        "call",
        "cause",
        "ctx",
        "finished",
        "in_order",
        "input_timeout",
        "input_timer",
        "inputs",
        "inputs_open",
        "job",
        "leg_budget",
        "leg_id",
        "leg_out",
        "leg_timer",
        "lost",
        "on_progress",
        "outcome",
        "override",
        "pending",
        "round",
        "started",
        "task_error",
        "tasks",
        "tasks_ended",
        "total_budget",
        "total_started",
        "waiting",
        "wake",
    )

    def __init__(
        self,
        ctx: FlowContext,
        started: float,
        on_progress: Callable[[m.Progress], None] | None,
        input_timeout: float | None,
    ) -> None:
        self.ctx = ctx
        self.call = 0
        # The flow's tasks: one cancel scope each, while it runs.
        self.tasks: set[anyio.CancelScope] = set()
        self.tasks_ended: anyio.Event | None = None
        self.task_error: BaseException | None = None
        self.started = started
        self.on_progress = on_progress
        self.input_timeout = input_timeout
        self.outcome: m.engine.EngineEvent | None = None
        self.lost: TransportError | None = None  # the link's failure, if it had failed by then
        # Why a Cancelled outcome happened when we cancelled on the caller's behalf.
        self.override: ClientError | None = None
        self.cause: BaseException | None = None  # an input handler's own exception
        #: The call has ended (its outcome, or an error, is in).
        self.finished = False
        # The caller's task waits on ``wake`` (``waiting``) for the end, or for ``job``: an
        # input handler to run there rather than in a task of its own.
        self.wake = ctx.loop.event()
        self.waiting = False
        self.job: tuple[anyio.CancelScope, Callable[..., Awaitable[None]], tuple[Any, ...]] | None
        self.job = None
        self.round = 0
        self.leg_id: m.RequestId | None = None
        self.leg_out = False
        self.leg_timer: anyio.CancelScope | None = None
        self.leg_budget: float | None = None  # the leg's timeout, to restart it with
        self.answering = 0  # 2025 server requests of this call being answered
        self.input_timer: anyio.CancelScope | None = None
        self.inputs: dict[str, anyio.CancelScope] = {}
        self.pending: set[str] = set()
        self.inputs_open = False
        self.in_order = InOrder(ctx.loop.event)
        # The caller's whole-flow budget and when it started (before any tools/list).
        self.total_budget: float | None = None
        self.total_started = started

    # --- Its tasks ---------------------------------------------------------------------

    def spawn(
        self,
        run: Callable[..., Awaitable[None]],
        *args: Any,
        scope: anyio.CancelScope | None = None,
    ) -> anyio.CancelScope:
        """Run ``run(*args)`` in a task of this flow (see the module docstring), under
        ``scope`` (a new one by default), which cancels it; returns that scope."""
        if scope is None:
            scope = self.ctx.loop.cancel_scope()
        self.tasks.add(scope)
        self.ctx.loop.spawn(self.ctx.task_group, self._task, scope, run, args)
        return scope

    async def _task(
        self, scope: anyio.CancelScope, run: Callable[..., Awaitable[None]], args: tuple[Any, ...]
    ) -> None:
        try:
            with scope:
                await run(*args)
        except anyio.get_cancelled_exc_class():
            raise  # the client's task group is being cancelled: so is this task
        except BaseException as exc:  # a bug; raised by run_flow (not in the client's task_group)
            if self.task_error is None:
                self.task_error = exc
            self.fail(ClientError(f"the call's task failed: {exc!r}"))
        finally:
            self.tasks.discard(scope)
            if not self.tasks and self.tasks_ended is not None:
                self.tasks_ended.set()

    async def end_tasks(self) -> None:
        """Cancel the flow's tasks and wait until they have ended (as a task group's end
        would; no pass of the run loop when there are none)."""
        if self.tasks:
            self.tasks_ended = self.ctx.loop.event()
            for scope in self.tasks:
                scope.cancel()
            with anyio.CancelScope(shield=True):
                await self.tasks_ended.wait()
        if self.task_error is not None:
            raise self.task_error

    async def wait_in_caller(self) -> None:
        """Wait for the call's end in the caller's task, running there the input handler
        the flow hands it meanwhile (see :meth:`_dispatch_input`): a task less per round."""
        try:
            while True:
                job, self.job = self.job, None
                if job is not None and not self.finished:
                    await self._task(*job)
                    continue
                if job is not None:  # the call ended before its handler was entered
                    self.tasks.discard(job[0])
                if self.finished:
                    return
                self.waiting = True
                try:
                    await self.wake.wait()
                finally:
                    self.waiting = False
                self.wake = self.ctx.loop.event()
        finally:
            if self.job is not None:  # (the caller gave up with a handler still to run)
                self.tasks.discard(self.job[0])
                self.job = None

    # --- The outcome -------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        """The complete result, or raise the error the flow ended with."""
        outcome = self.outcome
        if isinstance(outcome, m.engine.Done):
            return dict(outcome.result)
        if isinstance(outcome, m.engine.TimedOut):
            if outcome.limit == "total" and self.total_budget is not None:
                elapsed = self.ctx.loop.now() - self.total_started
                raise CallTimeout(elapsed, self.total_budget, "total")
            raise CallTimeout(outcome.elapsed, outcome.budget, outcome.limit)
        if isinstance(outcome, m.engine.Failed):
            error = outcome.error
            if isinstance(error, m.engine.InputFailed):
                raise InputUnavailable(error.reason, key=error.key) from self.cause
            if isinstance(error, m.engine.RoundLimitExceeded):
                if error.limit_name == "max_leg_reissues":
                    raise TransportError(
                        f"the response stream broke {error.limit + 1} times in a row",
                        kind="disconnect",
                    )
                raise RoundCapExceeded(
                    error.limit, limit_name=error.limit_name, last_result=error.last_result
                )
            if self.lost is not None and not isinstance(error, m.PeerError):
                raise self.lost.copy()
            raise CallError(error.code, error.message, error.data)
        if self.override is not None:
            raise self.override
        raise TransportError("the call was cancelled", kind="closed")

    def fail(self, error: ClientError) -> None:
        """End the call with ``error`` (unless it has ended): cancel it, on the wire too."""
        if self.finished:
            return
        self.override = error
        self.ctx.conn.cancel(self.call, self.ctx.loop.now())
        self.ctx.pump()

    def leg_broke(self, out: Outbound, error: TransportError) -> None:
        """The response stream of leg ``out`` broke before its answer: the engine re-issues it."""
        if self.leg_out and self.leg_id == out.request_id:
            self.leg_out = False
            self.leg_id = None
            self._disarm(self.leg_timer)
            logger.info("the response stream of a leg broke: re-issuing it (%s)", error)
            self.ctx.conn.leg_broken(self.call, self.ctx.loop.now())
            self.ctx.pump()

    # --- The engine's events -----------------------------------------------------------

    def on_event(self, event: m.CallEvent) -> None:
        """Act on one of this call's events (from the client's pump)."""
        step = event.event
        if isinstance(step, m.engine.SendRequest):
            self._send_leg(event)
        elif isinstance(step, m.engine.SendRetry):
            self.round = step.round
            self._close_inputs()
            if step.delay > 0:
                self.spawn(self._send_leg_later, event, step.delay)
            else:
                self._send_leg(event)
        elif isinstance(step, m.engine.CancelLeg):
            self.leg_out = False
            self._disarm(self.leg_timer)
            # stdio: notifications/cancelled; HTTP: nothing (the stream is closed below)
            self.ctx.send_out(
                self.ctx.outbound(
                    event,
                    "notification",
                    method="notifications/cancelled",
                    call=self.call,
                    round=self.round,
                )
            )
            if self.leg_id is not None:
                self.ctx.close_stream(self.leg_id)  # HTTP: closing the stream cancels
                self.leg_id = None
        elif isinstance(step, m.engine.RoundStarted):
            self.round = step.round
            self.leg_out = False
            self._disarm(self.leg_timer)
            self.in_order = InOrder(self.ctx.loop.event)
            if step.keys:
                self.inputs_open = True
                if step.input_timeout is not None:
                    self.input_timer = self._arm(step.input_timeout, self._input_expired)
        elif isinstance(step, m.engine.DispatchInput):
            self._dispatch_input(step)
        elif isinstance(step, m.engine.CancelInputs):
            for key in step.keys:
                self.pending.discard(key)
                scope = self.inputs.pop(key, None)
                if scope is not None:
                    scope.cancel()
        elif isinstance(step, _TERMINAL):
            self.outcome = step
            self.lost = self.ctx.lost()
            self.leg_out = False
            self._disarm(self.leg_timer)
            self._close_inputs()
            self.finished = True
            self.wake.set()

    # --- Legs and timers ---------------------------------------------------------------

    def _send_leg(self, event: m.CallEvent) -> None:
        step = event.event
        assert isinstance(step, (m.engine.SendRequest, m.engine.SendRetry))
        try:
            out = self.ctx.outbound(event, "leg", call=self.call, round=self.round)
        except m.LocalProtocolError as exc:  # e.g. max_outgoing requests already in flight
            self.fail(ClientError(f"cannot send the next leg: {exc}"))
            return
        if not out.data:  # the call ended while this leg waited out its delay
            return
        self._disarm(self.leg_timer)
        self.leg_out = True
        self.ctx.send_out(out)
        self.leg_id = out.request_id
        self.leg_budget = step.timeout
        if step.timeout is not None and not self.answering:
            self.leg_timer = self._arm(step.timeout, self._leg_expired)

    def answering_started(self) -> None:
        """A 2025 server asked this call's question inside the leg (``elicitation/create``
        on the open request): while it is answered (a person may be at a prompt), the
        leg's timer stops; the server's time is not the person's."""
        self.answering += 1
        self._disarm(self.leg_timer)
        self.leg_timer = None

    def answering_ended(self) -> None:
        """The answer is sent: the leg's timer starts again, whole (the server has as long
        to answer it as it had for the leg)."""
        self.answering -= 1
        if not (self.answering or self.finished) and self.leg_out and self.leg_budget is not None:
            self.leg_timer = self._arm(self.leg_budget, self._leg_expired)

    async def _send_leg_later(self, event: m.CallEvent, delay: float) -> None:
        await anyio.sleep(delay)
        if not self.finished:
            self._send_leg(event)

    def _arm(self, delay: float, fire: Callable[[], None]) -> anyio.CancelScope:
        return self.spawn(self._timer, delay, fire)

    async def _timer(self, delay: float, fire: Callable[[], None]) -> None:
        await server_sleep(self.ctx.person, delay)
        if not self.finished:
            fire()

    @staticmethod
    def _disarm(scope: anyio.CancelScope | None) -> None:
        if scope is not None:
            scope.cancel()

    def _leg_expired(self) -> None:
        if self.leg_out:
            self.leg_out = False
            self.ctx.conn.leg_timed_out(self.call, self.ctx.loop.now())
            self.ctx.pump()

    def _input_expired(self) -> None:
        if self.inputs_open:
            self._close_inputs()
            self.ctx.conn.input_timed_out(self.call, self.ctx.loop.now())
            self.ctx.pump()

    async def total_timer(self, budget: float) -> None:
        """The caller's whole-flow budget."""
        await server_sleep(self.ctx.person, budget)
        # Usually the engine's own leg or input timer (capped by the budget) ends the
        # flow first; this one covers the gaps (a retry's delay, the session opening).
        elapsed = self.ctx.loop.now() - self.total_started
        self.fail(CallTimeout(elapsed, self.total_budget, "total"))

    # --- Inputs ------------------------------------------------------------------------

    def _close_inputs(self) -> None:
        self.inputs_open = False
        self.pending.clear()
        self._disarm(self.input_timer)
        for scope in self.inputs.values():
            scope.cancel()
        self.inputs.clear()

    def _dispatch_input(self, step: m.engine.DispatchInput) -> None:
        if not self.inputs_open:
            return
        self.pending.add(step.key)
        if self.ctx.answer is None:
            self._fail_input(step.key, "this client has no input handler")
            return
        before, mine = self.in_order.turn()
        scope = self.inputs[step.key] = self.ctx.loop.cancel_scope()
        args = (step.key, step.request, before, mine)
        if self.waiting and self.job is None:
            # The caller's task is idle, waiting for the end: the handler runs there.
            self.tasks.add(scope)
            self.job = (scope, self._run_input, args)
            self.wake.set()
        else:
            self.spawn(self._run_input, *args, scope=scope)

    async def _run_input(
        self,
        key: str,
        request: m.wire.InputRequest,
        before: anyio.Event | None,
        mine: anyio.Event,
    ) -> None:
        answer_input = self.ctx.answer
        assert answer_input is not None
        await InOrder.enter(before, mine)
        try:
            try:
                answering = answer_input(key, request)
            finally:
                mine.set()  # (the next task runs once this one's handler first pauses)
            answer = await answering
        except InputUnavailable as exc:
            self._fail_input(key, exc.reason)
            return
        except Exception as exc:
            self.cause = exc
            self._fail_input(key, f"the input handler failed: {exc!r}")
            return
        problem = answer_problem(request, answer)
        if problem is not None:
            self._fail_input(key, problem)
            return
        if self.inputs_open and key in self.pending:
            self.pending.discard(key)
            self.inputs.pop(key, None)
            self.ctx.conn.provide(self.call, key, answer, self.ctx.loop.now())
            self.ctx.pump()

    def _fail_input(self, key: str, reason: str) -> None:
        if self.inputs_open and key in self.pending:
            self._close_inputs()
            self.ctx.conn.fail_input(self.call, key, reason)
            self.ctx.pump()


class Waiter:
    """A plain request (one leg, no rounds: ``Client.request``) waiting for its answer."""

    __slots__ = ("error", "event", "method", "response")

    def __init__(self, method: str, event: anyio.Event) -> None:
        self.method = method
        self.event = event
        self.response: m.ResultResponse | m.ErrorResponse | None = None
        self.error: ClientError | None = None

    def settle(
        self,
        response: m.ResultResponse | m.ErrorResponse | None = None,
        error: ClientError | None = None,
    ) -> None:
        if not self.event.is_set():
            self.response, self.error = response, error
            self.event.set()
