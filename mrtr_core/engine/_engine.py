"""The round engine: one logical MRTR call, from the first leg to a terminal event.

The engine does no I/O and reads no clock.  Inputs that need time take
``now``, monotonic seconds from the caller's clock; the engine only compares
and subtracts them.  Inputs queue events; ``next_event()`` hands them out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, NoReturn

from .._errors import (
    INTERNAL_ERROR,
    InputFailed,
    InvalidInputRequired,
    LocalProtocolError,
    MrtrError,
    PeerError,
    RemoteProtocolError,
    RoundLimitExceeded,
    describe,
)
from .._meta import declared_capabilities
from .._wait import FINISHED, NEED_INPUT, NEED_RESULT, NEED_START, Wait
from ..wire._convert import (
    structure_input_request,
    unstructure_input_request,
    unstructure_input_response,
)
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import ElicitUrlRequest, ErrorObject, InputRequest, InputResponse
from ._events import (
    CancelInputs,
    Cancelled,
    CancelLeg,
    DispatchInput,
    Done,
    EngineEvent,
    Failed,
    RoundStarted,
    SendRequest,
    SendRetry,
    TimedOut,
    TimeoutLimit,
)
from ._retry import MRTR_METHODS, strip_round_fields
from ._rounds import answer_problem, read_input_requests, read_round_fields
from ._state import TERMINAL_STATES, TRANSITIONS, EngineInput, EngineState

#: The version of :meth:`RoundEngine.snapshot`'s format.
SNAPSHOT_VERSION = 1
#: Pacing of requestState-only legs: 50 ms, doubling, capped at 250 ms.
PACE_FIRST = 0.05
PACE_CAP = 0.25
#: Legs that wait for a person at a URL (after a URL elicitation was accepted) are paced
#: up to 1 s, and bounded by ``url_wait_timeout`` (15 minutes by default), not by
#: ``max_state_only_legs``: a person in a browser takes minutes, a server does not.
URL_PACE_CAP = 1.0
DEFAULT_URL_WAIT = 900.0

_WAIT_FOR_STATE = {
    EngineState.IDLE: NEED_START,
    EngineState.AWAITING_RESULT: NEED_RESULT,
    EngineState.AWAITING_INPUT: NEED_INPUT,
}


def _check_limit(name: str, value: float | None, *, integer: bool = False) -> None:
    if value is None:
        return
    if integer:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    else:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    if not ok:
        kind = "a non-negative int" if integer else "a positive number or None"
        raise LocalProtocolError(f"{name} must be {kind}, got {describe(value)}")


def _min(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


class RoundEngine:
    """Drives one ``tools/call``, ``prompts/get`` or ``resources/read`` through its rounds.

    ``params`` is the original request's params (never mutated).  Client
    capabilities come from ``capabilities`` or, when that is ``None``, from
    ``params["_meta"]["io.modelcontextprotocol/clientCapabilities"`` (absent = none).

    Limits: ``leg_timeout`` bounds the server's time on each leg; ``total_timeout``
    the whole flow from ``start``; ``input_timeout`` each round's wait for
    answers.  ``max_rounds`` caps retries for rounds with input requests,
    ``max_state_only_legs`` the requestState-only legs of the flow, and
    ``max_leg_reissues`` the re-sends of one leg after broken streams.
    After a round in which a URL elicitation was accepted, requestState-only legs
    wait for the person at that URL (the server polls its own state, e.g. an OAuth
    callback): they are not counted against ``max_state_only_legs`` but bounded by
    ``url_wait_timeout`` seconds from the acceptance (``TimedOut(limit="input")``),
    and paced up to :data:`URL_PACE_CAP`.
    ``input_kinds`` is the registry of input request kinds the client can take.
    """

    def __init__(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        capabilities: Mapping[str, Any] | None = None,
        leg_timeout: float | None = None,
        total_timeout: float | None = None,
        input_timeout: float | None = None,
        max_rounds: int = 10,
        max_state_only_legs: int = 10,
        max_leg_reissues: int = 3,
        input_kinds: InputRegistry = INPUT_KINDS,
        url_wait_timeout: float | None = DEFAULT_URL_WAIT,
    ) -> None:
        if method not in MRTR_METHODS:
            raise LocalProtocolError(f"{describe(method)} cannot answer input_required")
        if not isinstance(params, (dict, Mapping)):
            raise LocalProtocolError("params must be a mapping")
        _check_limit("leg_timeout", leg_timeout)
        _check_limit("total_timeout", total_timeout)
        _check_limit("input_timeout", input_timeout)
        _check_limit("max_rounds", max_rounds, integer=True)
        _check_limit("max_state_only_legs", max_state_only_legs, integer=True)
        _check_limit("max_leg_reissues", max_leg_reissues, integer=True)
        _check_limit("url_wait_timeout", url_wait_timeout)
        if capabilities is None:
            capabilities = declared_capabilities(params) or {}
        elif not isinstance(capabilities, (dict, Mapping)):
            raise LocalProtocolError("capabilities must be a mapping")
        self.method = method
        self.params = params
        self.capabilities = capabilities
        self.leg_timeout = leg_timeout
        self.total_timeout = total_timeout
        self.input_timeout = input_timeout
        self.max_rounds = max_rounds
        self.max_state_only_legs = max_state_only_legs
        self.max_leg_reissues = max_leg_reissues
        self.input_kinds = input_kinds
        self.url_wait_timeout = url_wait_timeout

        self.state = EngineState.IDLE
        self._events: deque[EngineEvent] = deque()
        self._started_at = 0.0
        #: Rounds seen (every accepted input_required result), legs put on the wire.
        self.round = 0
        self.legs = 0
        self._input_rounds = 0
        self._state_only_legs = 0
        self._reissues = 0
        self._pace: float | None = None
        # A URL elicitation accepted in this round; since when its person is waited for.
        self._url_accepted = False
        self._url_wait_since: float | None = None
        # The original params without round fields: every leg's base (built by start).
        self._base = strip_round_fields(params)
        # The leg in flight.
        self._leg_params: Mapping[str, Any] = params
        self._leg_is_retry = False
        self._leg_sent_at = 0.0
        self._leg_budget: float | None = None
        self._leg_limit: TimeoutLimit = "leg"
        # The round waiting for answers.
        self._pending: dict[str, InputRequest] = {}
        self._responses: dict[str, Any] = {}
        self._request_state: str | None = None
        self._round_started_at = 0.0
        self._input_deadline: float | None = None
        self._input_limit: TimeoutLimit = "input"
        #: The last input_required result received (plain mapping), for diagnostics.
        self.last_input_required: Mapping[str, Any] | None = None

    # --- Reading the engine -------------------------------------------------

    def next_event(self) -> EngineEvent | Wait:
        """The next queued event, or what the engine waits for (:class:`Wait`)."""
        if self._events:
            return self._events.popleft()
        if self.state in TERMINAL_STATES:
            return FINISHED
        return _WAIT_FOR_STATE[self.state]

    @property
    def pending_keys(self) -> tuple[str, ...]:
        """The keys of the current round still waiting for an answer."""
        return tuple(self._pending)

    # --- Inputs ---------------------------------------------------------------

    def start(self, now: float) -> None:
        """Begin the flow: queues ``SendRequest`` for the original leg."""
        self._enter(EngineInput.START)
        self._started_at = now
        # Round fields in the caller's params are stale by definition: the engine owns
        # the flow from here (resume one with snapshot/restore, not by hand-set fields).
        self._send_leg(now, dict(self._base), retry=False, delay=0.0, reissue=False)

    def receive_result(self, result: Mapping[str, Any], now: float) -> None:
        """The leg in flight was answered with ``result`` (the plain result mapping)."""
        self._enter(EngineInput.RESULT)
        if not isinstance(result, (dict, Mapping)):
            self._misuse("result must be the result mapping")
        self._reissues = 0
        result_type = result.get("resultType", "complete")
        if result_type == "complete":
            self._finish(EngineState.DONE, Done(result=result))
        elif result_type == "input_required":
            self._on_input_required(result, now)
        elif result_type == "task":
            self._on_task(result)
        else:
            self._fail(InvalidInputRequired(f"unknown resultType {describe(result_type)}"))

    def receive_error(self, error: ErrorObject | Mapping[str, Any], now: float) -> None:
        """The leg in flight was answered with a JSON-RPC error: the flow fails with it."""
        self._enter(EngineInput.ERROR_RESPONSE)
        if isinstance(error, ErrorObject):
            peer = PeerError(error.code, error.message, error.data)
        elif isinstance(error, (dict, Mapping)):
            code, message = error.get("code"), error.get("message")
            peer = PeerError(
                code if isinstance(code, int) else 0,
                message if isinstance(message, str) else "",
                error.get("data"),
            )
        else:
            self._misuse("error must be an ErrorObject or a mapping")
        self._fail(peer)

    def leg_timed_out(self, now: float) -> None:
        """The leg's ``timeout`` ran out: queues ``CancelLeg`` then ``TimedOut``."""
        self._enter(EngineInput.LEG_TIMED_OUT)
        self._events.append(CancelLeg(leg=self.legs))
        if self._leg_limit == "total":
            self._timed_out_total(now)
        else:
            elapsed = now - self._leg_sent_at
            self._finish(
                EngineState.TIMED_OUT,
                TimedOut(elapsed=elapsed, budget=self._leg_budget, limit="leg"),
            )

    def leg_broken(self, now: float) -> None:
        """The leg's stream broke before its answer: re-issue it with a new id (bounded)."""
        self._enter(EngineInput.LEG_BROKEN)
        self._reissues += 1
        if self._reissues > self.max_leg_reissues:
            self._fail(
                RoundLimitExceeded(
                    "max_leg_reissues", self.max_leg_reissues, self.last_input_required
                )
            )
            return
        self._send_leg(now, self._leg_params, retry=self._leg_is_retry, delay=0.0, reissue=True)

    def provide(self, key: str, response: InputResponse | Mapping[str, Any], now: float) -> None:
        """The app's answer for ``key``; the last answer of a round queues ``SendRetry``."""
        self._enter(EngineInput.PROVIDE)
        request = self._pending.get(key) if isinstance(key, str) else None
        if request is None:
            self._misuse(f"{describe(key)} is not an input request waiting for an answer")
        wire = self._check_response(key, request, response)
        del self._pending[key]
        if self._input_deadline is not None and now > self._input_deadline:
            self._input_expired(now)  # too late: the answer is dropped, not sent
            return
        self._responses[key] = wire
        if isinstance(request, ElicitUrlRequest) and wire.get("action") == "accept":
            self._url_accepted = True
        if self._pending:
            self.state = EngineState.AWAITING_INPUT
            return
        params = self._retry_params(self._responses, self._request_state)
        self._url_wait_since = now if self._url_accepted else None
        self._send_leg(now, params, retry=True, delay=0.0, reissue=False)

    def fail(self, key: str, reason: str) -> None:
        """The app cannot answer ``key``: cancels the round's other keys and fails the flow."""
        self._enter(EngineInput.FAIL)
        if not isinstance(key, str) or key not in self._pending:
            self._misuse(f"{describe(key)} is not an input request waiting for an answer")
        others = tuple(k for k in self._pending if k != key)
        self._pending.clear()
        if others:
            self._events.append(CancelInputs(keys=others))
        self._fail(InputFailed(key, str(reason)))

    def input_timed_out(self, now: float) -> None:
        """The round's ``input_timeout`` (from ``RoundStarted``) ran out."""
        self._enter(EngineInput.INPUT_TIMED_OUT)
        self._input_expired(now)

    def cancel(self, now: float | None = None) -> None:
        """Cancel the flow: ``CancelInputs`` for pending keys, ``CancelLeg`` for a leg in
        flight, then ``Cancelled``.  A no-op once the flow has ended."""
        before = self.state
        self._enter(EngineInput.CANCEL)
        if before in TERMINAL_STATES:
            return
        if before is EngineState.AWAITING_INPUT:
            keys = tuple(self._pending)
            self._pending.clear()
            self._events.append(CancelInputs(keys=keys))
        elif before is EngineState.AWAITING_RESULT:
            self._events.append(CancelLeg(leg=self.legs))
        self._finish(EngineState.CANCELLED, Cancelled())

    # --- Snapshot and restore: the engine's own fields, as a plain JSON-able value ---

    def snapshot(self, now: float) -> dict[str, Any]:
        """The engine's state as a plain JSON-able value, to resume it elsewhere.

        Allowed while the flow is open and every queued event has been handed
        out.  Times are stored as elapsed seconds, so the snapshot does not depend
        on this process's monotonic clock.
        """
        if self.state in TERMINAL_STATES or self._events:
            raise LocalProtocolError("snapshot needs an open flow with every event handed out")
        return {
            "version": SNAPSHOT_VERSION,
            "method": self.method,
            "params": dict(self.params),
            "capabilities": dict(self.capabilities),
            "options": {
                "leg_timeout": self.leg_timeout,
                "total_timeout": self.total_timeout,
                "input_timeout": self.input_timeout,
                "max_rounds": self.max_rounds,
                "max_state_only_legs": self.max_state_only_legs,
                "max_leg_reissues": self.max_leg_reissues,
                "url_wait_timeout": self.url_wait_timeout,
            },
            "state": self.state.value,
            "elapsed": now - self._started_at,
            "round": self.round,
            "legs": self.legs,
            "input_rounds": self._input_rounds,
            "state_only_legs": self._state_only_legs,
            "reissues": self._reissues,
            "pace": self._pace,
            "url_accepted": self._url_accepted,
            "url_waited": None if self._url_wait_since is None else now - self._url_wait_since,
            "leg_params": dict(self._leg_params),
            "leg_is_retry": self._leg_is_retry,
            "pending": {k: unstructure_input_request(v) for k, v in self._pending.items()},
            "responses": dict(self._responses),
            "request_state": self._request_state,
            "round_elapsed": now - self._round_started_at,
            "last_input_required": (
                None if self.last_input_required is None else dict(self.last_input_required)
            ),
        }

    @classmethod
    def restore(
        cls,
        snapshot: Mapping[str, Any],
        now: float,
        *,
        input_kinds: InputRegistry = INPUT_KINDS,
    ) -> RoundEngine:
        """An engine resumed from :meth:`snapshot`, with its clock rebased on ``now``.

        What the old process had out is handed out again: a leg in flight is
        re-issued (``reissue=True``, it needs a new id), and a round's unanswered
        input requests are dispatched again.  A malformed snapshot raises
        :class:`LocalProtocolError`.  ``input_kinds`` is not stored: pass the
        registry the snapshotted engine had, if it was not the default.
        """
        try:
            return cls._restored(snapshot, now, input_kinds)
        except LocalProtocolError:
            raise
        except Exception as exc:  # any shape error in stored data, ours included
            raise LocalProtocolError(f"invalid snapshot: {exc!r:.200}") from exc

    @classmethod
    def _restored(
        cls, snap: Mapping[str, Any], now: float, input_kinds: InputRegistry
    ) -> RoundEngine:
        """:meth:`restore`, its errors not yet wrapped; restoring rebases the stored
        elapsed times on the new ``now``."""
        if snap["version"] != SNAPSHOT_VERSION:
            raise LocalProtocolError(f"unknown snapshot version {describe(snap['version'])}")
        engine = cls(
            snap["method"],
            snap["params"],
            capabilities=snap["capabilities"],
            input_kinds=input_kinds,
            **snap["options"],
        )
        state = EngineState(snap["state"])
        if state in TERMINAL_STATES:  # (an open state: one whose wait the engine names)
            raise LocalProtocolError(f"cannot restore a flow in state {state.value}")
        engine.state = state
        engine._started_at = now - float(snap["elapsed"])
        engine.round = int(snap["round"])
        engine.legs = int(snap["legs"])
        engine._input_rounds = int(snap["input_rounds"])
        engine._state_only_legs = int(snap["state_only_legs"])
        engine._reissues = int(snap["reissues"])
        pace = snap["pace"]
        engine._pace = None if pace is None else float(pace)
        # (absent from a snapshot of an older version: no person waited for)
        engine._url_accepted = bool(snap.get("url_accepted", False))
        waited = snap.get("url_waited")
        engine._url_wait_since = None if waited is None else now - float(waited)
        engine._leg_params = dict(snap["leg_params"])
        engine._leg_is_retry = bool(snap["leg_is_retry"])
        engine._responses = dict(snap["responses"])
        request_state = snap["request_state"]
        if request_state is not None and not isinstance(request_state, str):
            raise LocalProtocolError("invalid snapshot: request_state must be a str")
        engine._request_state = request_state
        last = snap["last_input_required"]
        engine.last_input_required = None if last is None else dict(last)
        if state is EngineState.AWAITING_RESULT:
            # The leg in flight died with the old process: re-issue it with a new id.
            # Not counted against max_leg_reissues (that bounds one process's broken
            # streams); how often a stored flow is resumed is the app's decision.
            params, retry = engine._leg_params, engine._leg_is_retry
            engine._send_leg(now, params, retry=retry, delay=0.0, reissue=True)
        elif state is EngineState.AWAITING_INPUT:
            engine._pending = {
                k: structure_input_request(v, input_kinds) for k, v in dict(snap["pending"]).items()
            }
            engine._round_started_at = now - float(snap["round_elapsed"])
            engine._open_round(now)
        return engine

    # --- Internals ----------------------------------------------------------------

    def _enter(self, given: EngineInput) -> None:
        """Check (state, input) against the table; misuse kills the flow."""
        if (self.state, given) not in TRANSITIONS:
            self._misuse(f"{given.value}() is not allowed in state {self.state.value}")

    def _misuse(self, message: str) -> NoReturn:
        if self.state not in TERMINAL_STATES:
            self.state = EngineState.ERROR
        raise LocalProtocolError(message)

    def _finish(self, state: EngineState, event: EngineEvent) -> None:
        self.state = state
        self._events.append(event)

    def _fail(self, error: MrtrError) -> None:
        self._finish(EngineState.FAILED, Failed(error=error))

    def _remaining(self, now: float) -> float | None:
        if self.total_timeout is None:
            return None
        return self.total_timeout - (now - self._started_at)

    def _budget_spent(self, now: float, reserve: float = 0.0) -> bool:
        """If the whole-flow budget is spent (keeping ``reserve`` s), end with TimedOut."""
        remaining = self._remaining(now)
        if remaining is None or remaining > reserve:
            return False
        self._timed_out_total(now)
        return True

    def _send_leg(
        self,
        now: float,
        params: Mapping[str, Any],
        *,
        retry: bool,
        delay: float,
        reissue: bool,
    ) -> None:
        if self._budget_spent(now, reserve=delay):
            return
        remaining = self._remaining(now)
        remaining = None if remaining is None else remaining - delay
        timeout = _min(self.leg_timeout, remaining)
        self._leg_limit = "total" if remaining is not None and timeout == remaining else "leg"
        self._leg_budget = timeout
        self._leg_params = params
        self._leg_is_retry = retry
        self._leg_sent_at = now + delay
        self.legs += 1
        self.state = EngineState.AWAITING_RESULT
        if retry:
            self._events.append(
                SendRetry(
                    params=params,
                    timeout=timeout,
                    delay=delay,
                    round=self.round,
                    leg=self.legs,
                    reissue=reissue,
                )
            )
        else:
            self._events.append(
                SendRequest(params=params, timeout=timeout, leg=self.legs, reissue=reissue)
            )

    def _on_input_required(self, result: Mapping[str, Any], now: float) -> None:
        try:
            raw_requests, request_state = read_round_fields(result)
        except InvalidInputRequired as exc:
            self._fail(exc)
            return
        self.last_input_required = result
        # The budget first: no prompt is shown whose answer would be thrown away.
        if self._budget_spent(now):
            return
        if raw_requests:
            self._input_rounds += 1
            if self._input_rounds > self.max_rounds:
                self._fail(RoundLimitExceeded("max_rounds", self.max_rounds, result))
                return
            try:
                requests = read_input_requests(raw_requests, self.capabilities, self.input_kinds)
            except InvalidInputRequired as exc:  # (MissingCapability is one)
                self._fail(exc)
                return
            self.round += 1
            self._pace = None
            self._url_accepted = False
            self._url_wait_since = None
            self._pending = requests
            self._responses = {}
            self._request_state = request_state
            self._round_started_at = now
            self._open_round(now)
            return
        if self._url_wait_since is not None:
            # Waiting for a person at a URL, not for the server: human time, not legs.
            waited = now - self._url_wait_since
            if self.url_wait_timeout is not None and waited > self.url_wait_timeout:
                timed_out = TimedOut(elapsed=waited, budget=self.url_wait_timeout, limit="input")
                self._finish(EngineState.TIMED_OUT, timed_out)
                return
            cap = URL_PACE_CAP
        else:
            self._state_only_legs += 1
            if self._state_only_legs > self.max_state_only_legs:
                limit = RoundLimitExceeded("max_state_only_legs", self.max_state_only_legs, result)
                self._fail(limit)
                return
            cap = PACE_CAP
        self.round += 1
        self._pace = PACE_FIRST if self._pace is None else min(self._pace * 2, cap)
        self._events.append(RoundStarted(round=self.round, keys=(), kinds=(), input_timeout=None))
        self._send_leg(
            now,
            self._retry_params(None, request_state),
            retry=True,
            delay=self._pace,
            reissue=False,
        )

    def _on_task(self, result: Mapping[str, Any]) -> None:
        """A task (SEP-2663) ends the MRTR phase with ``Done``: the caller polls it.  It is
        a valid answer only to a ``tools/call`` that declared the tasks extension; to
        anything else it is an invalid response (the SEP's words), as is a malformed one."""
        # (imported here: mrtr_core.tasks drives tasks with the engine's events)
        from ..tasks._gate import TASKS_EXTENSION, declares_tasks
        from ..tasks._wire import TASK_AUGMENTABLE_METHODS, CreateTaskResult

        if self.method not in TASK_AUGMENTABLE_METHODS:
            problem = f"{self.method} cannot be answered with a task"
        elif not declares_tasks(self.capabilities):
            problem = f"a task answered a request that did not declare {TASKS_EXTENSION}"
        else:
            try:
                CreateTaskResult.from_result(result)
            except RemoteProtocolError as exc:
                problem = f"malformed CreateTaskResult: {exc.message}"
            else:
                self._finish(EngineState.DONE, Done(result=result))
                return
        self._fail(RemoteProtocolError(problem, code=INTERNAL_ERROR))

    def _open_round(self, now: float) -> None:
        """Queue RoundStarted and one DispatchInput per pending key."""
        remaining = self._remaining(now)
        waited = now - self._round_started_at
        own = None if self.input_timeout is None else self.input_timeout - waited
        wait = _min(own, remaining)
        self._input_limit = "total" if remaining is not None and wait == remaining else "input"
        self._input_deadline = None if wait is None else now + wait
        self.state = EngineState.AWAITING_INPUT
        if wait is not None and wait <= 0:
            # Only a restore gets here: the wait ran out while the flow was stored.
            # Nothing was dispatched in this process, so there is nothing to cancel.
            self._pending.clear()
            self._input_expired(now)
            return
        keys = tuple(self._pending)
        self._events.append(
            RoundStarted(
                round=self.round,
                keys=keys,
                kinds=tuple(self.input_kinds.kind_for(r).name for r in self._pending.values()),
                input_timeout=wait,
            )
        )
        for key, request in self._pending.items():
            self._events.append(DispatchInput(key=key, request=request, round=self.round))

    def _retry_params(
        self, responses: dict[str, Any] | None, request_state: str | None
    ) -> dict[str, Any]:
        """``build_retry_params`` from parts already checked: the base built once by
        ``start``, this round's answers already in wire form (a fresh dict each round,
        so the leg's params own it), the requestState as received."""
        params = dict(self._base)
        if responses:
            params["inputResponses"] = responses
        if request_state is not None:
            params["requestState"] = request_state
        return params

    def _check_response(
        self,
        key: str,
        request: InputRequest,
        response: InputResponse | Mapping[str, Any],
    ) -> dict[str, Any]:
        # The usual answer, the typed class the request's kind expects, costs one
        # dict lookup to check and one generated function to write.
        kind = self.input_kinds.kind_of(request)
        if kind is not None and type(response) is kind.response_class:
            return unstructure_input_response(response)
        problem = answer_problem(key, request, response, self.input_kinds)
        if problem is not None:
            self._misuse(problem)
        return unstructure_input_response(response)

    def _input_expired(self, now: float) -> None:
        keys = tuple(self._pending)
        self._pending.clear()
        if keys:
            self._events.append(CancelInputs(keys=keys))
        if self._input_limit == "total":
            self._timed_out_total(now)
        else:
            elapsed = now - self._round_started_at
            self._finish(
                EngineState.TIMED_OUT,
                TimedOut(elapsed=elapsed, budget=self.input_timeout, limit="input"),
            )

    def _timed_out_total(self, now: float) -> None:
        """End with the whole-flow budget spent: elapsed since start, against total_timeout."""
        self._finish(
            EngineState.TIMED_OUT,
            TimedOut(elapsed=now - self._started_at, budget=self.total_timeout, limit="total"),
        )
