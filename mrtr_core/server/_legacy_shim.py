"""Serving a 2025-era client with a multi round-trip handler.

A 2025-era client cannot take an ``input_required`` result: it expects the
server to ask it with server-to-client requests (``elicitation/create``,
``sampling/createMessage``, ``roots/list``) while the original request waits.
:class:`LegacyShim` does exactly that for one request, on the same
connection: it runs the handler, turns each round's input requests into real
requests to the client, collects the answers, and runs the handler again with
this round's answers (replaced each round, never accumulated) and the state
the handler sealed, until the handler returns its result.

Sans-IO like the rest: the shim hands out events (``ShimSend`` a message,
``ShimWait`` before a requestState-only round, ``ShimDone`` with the response
for the original request) and takes the client's answers with ``receive``.

Limits, as the round engine has them: at most ``max_rounds`` rounds that ask
something (10) and, separately, ``max_state_only_rounds`` requestState-only
rounds over the whole request (10; a round that asks does not reset the
count), then a -32603 error naming the limit.  A handler
that asks for something the client did not declare in ``initialize`` gets its
own fallback if it has one (``ctx.can_ask``); otherwise the client gets a
-32603 error naming the missing capabilities in ``data.requiredCapabilities``
(2025-era clients have no -32021).  Never a hang: an answer that never comes
is the app's timeout to enforce (``cancel``).
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .._errors import INTERNAL_ERROR, LocalProtocolError, MrtrError
from .._meta import RequestInfo
from .._wait import FINISHED, NEED_INPUT, NEED_RESULT, NEED_START, Wait
from ..engine._engine import PACE_CAP, PACE_FIRST
from ..engine._retry import strip_round_fields
from ..wire._convert import structure_input_required, unstructure_input_request
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import (
    ErrorObject,
    ErrorResponse,
    InputRequest,
    Notification,
    Request,
    RequestId,
    ResultResponse,
    error_response,
)
from ._asking import CapabilityRequired, required_capabilities
from ._handlers import Handler, run_handler
from ._sealing import StateSealer


@attrs.frozen(kw_only=True)
class ShimSend:
    """Send ``message`` on the connection (a request to the client, or a cancellation)."""

    message: Request | Notification


@attrs.frozen(kw_only=True)
class ShimWait:
    """A requestState-only round: call ``resume(now)`` after ``delay`` seconds."""

    delay: float


@attrs.frozen(kw_only=True)
class ShimDone:
    """Send ``response`` for the original request; the shim is finished."""

    response: ResultResponse | ErrorResponse


@attrs.frozen(kw_only=True)
class ShimRun:
    """Run the app on ``request`` (a leg with this round's answers and state), then
    pass its result, or the ``MrtrError`` it raised, to ``leg_done``.

    Only from a shim made with ``handler=None``: the app runs its own legs (an
    async handler that streams progress, say) and the shim does the rest.
    """

    request: Request


ShimEvent = ShimSend | ShimWait | ShimDone | ShimRun


def legacy_request(
    request_id: RequestId, ask: InputRequest, input_kinds: InputRegistry = INPUT_KINDS
) -> Request:
    """The 2025-era server-to-client request for one input request (its registry
    entry gives the method, and the id param a 2025 request of its kind carries)."""
    kind = input_kinds.kind_for(ask)
    params = dict(unstructure_input_request(ask).get("params") or {})
    if kind.legacy_id_param is not None:
        params[kind.legacy_id_param] = secrets.token_urlsafe(12)  # 2025 URL mode names each one
    return Request(id=request_id, method=kind.legacy_method, params=params or None)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class LegacyShim:
    """One 2025-era request served by a multi round-trip ``handler``.

    ``new_id`` gives ids for the server-to-client requests (pass the
    connection's ``new_request_id``).  Feed every ``ResultResponse`` /
    ``ErrorResponse`` whose id is in ``waiting_for`` to ``receive``.

    ``rounds`` counts every round, ``input_rounds`` those that asked something
    (capped by ``max_rounds``) and ``state_only_rounds`` the others (capped by
    ``max_state_only_rounds``).  ``input_kinds`` is the registry of what a
    handler may ask.
    """

    def __init__(
        self,
        handler: Handler | None,
        request: Request,
        info: RequestInfo,
        *,
        new_id: Callable[[], RequestId],
        sealer: StateSealer | None,
        principal: str | None,
        max_rounds: int = 10,
        max_state_only_rounds: int = 10,
        input_kinds: InputRegistry = INPUT_KINDS,
    ) -> None:
        if not _is_count(max_rounds) or max_rounds < 1:
            raise LocalProtocolError("max_rounds must be a positive integer")
        if not _is_count(max_state_only_rounds):
            raise LocalProtocolError("max_state_only_rounds must be a non-negative integer")
        self.handler = handler
        self.request = request
        self.info = info
        self.new_id = new_id
        self.sealer = sealer
        self.principal = principal
        self.max_rounds = max_rounds
        self.max_state_only_rounds = max_state_only_rounds
        self.input_kinds = input_kinds
        self.rounds = 0
        self.input_rounds = 0
        self.state_only_rounds = 0
        self.finished = False
        self._events: deque[ShimEvent] = deque()
        self._params = strip_round_fields(request.params or {})
        self._state: str | None = None
        self._asked: dict[RequestId, str] = {}  # server request id -> input key
        self._kinds: dict[str, str] = {}  # input key -> the kind this shim asked it as
        self._answers: dict[str, Any] = {}
        self._pace: float | None = None
        self._running = False  # a ShimRun is out and its leg_done has not come

    @property
    def waiting_for(self) -> tuple[RequestId, ...]:
        """Ids of the requests to the client still waiting for an answer."""
        return tuple(self._asked)

    def next_event(self) -> ShimEvent | Wait:
        """The next event, or the :class:`~mrtr_core.Wait` member saying what the shim
        waits for: ``NEED_INPUT`` (the client's answers to its questions),
        ``NEED_RESULT`` (the app's ``leg_done`` after a ``ShimRun``), ``NEED_START``
        (``start``, or ``resume`` after a ``ShimWait``) or ``FINISHED``."""
        if self._events:
            return self._events.popleft()
        if self.finished:
            return FINISHED
        if self._running:
            return NEED_RESULT
        return NEED_INPUT if self._asked else NEED_START

    def start(self, now: float) -> None:
        """Run the handler for the first time."""
        self._run(now, answers=None)

    def resume(self, now: float) -> None:
        """After a ``ShimWait``: run the handler again with the state alone."""
        if self.finished or self._asked or self._running:
            raise LocalProtocolError("resume() follows a ShimWait")
        self._run(now, answers=None)

    def receive(self, response: ResultResponse | ErrorResponse, now: float) -> None:
        """The client's answer to one of our requests."""
        key = self._asked.pop(response.id, None) if response.id is not None else None
        if key is None:
            raise LocalProtocolError(f"{response.id!r} is not a request of this shim")
        if isinstance(response, ErrorResponse):
            self._cancel_asks()
            self._finish_error(
                f"the client could not answer {key!r}: {response.error.message}",
                data={"key": key, "clientError": response.error.code},
            )
            return
        self._answers[key] = response.result
        if not self._asked:
            answers, self._answers = self._answers, {}
            self._run(now, answers=answers)

    def cancel(self) -> None:
        """The client cancelled the original request: withdraw our questions, answer nothing."""
        if self.finished:
            return
        self._cancel_asks()
        self.finished = True

    def _cancel_asks(self) -> None:
        for rid in self._asked:
            note = Notification(method="notifications/cancelled", params={"requestId": rid})
            self._events.append(ShimSend(message=note))
        self._asked.clear()

    def _run(self, now: float, *, answers: Mapping[str, Any] | None) -> None:
        params = dict(self._params)
        if answers is not None:
            params["inputResponses"] = dict(answers)  # this round's only
        if self._state is not None:
            params["requestState"] = self._state
        leg = Request(id=self.request.id, method=self.request.method, params=params)
        if self.handler is None:
            self._running = True
            self._events.append(ShimRun(request=leg))
            return
        try:
            result = run_handler(
                self.handler,
                leg,
                self.info,
                sealer=self.sealer,
                principal=self.principal,
                now=now,
                input_kinds=self.input_kinds,
                # These answers came back to requests this shim itself sent: proven.
                vouched={key: self._kinds[key] for key in answers or {}},
            )
        except MrtrError as exc:
            self._settle(exc)
            return
        self._settle(result)

    def leg_done(self, outcome: Mapping[str, Any] | MrtrError) -> None:
        """After a ``ShimRun``: the app's result for that leg, or the error it raised."""
        if not self._running:
            raise LocalProtocolError("leg_done() answers a ShimRun")
        self._running = False
        if not self.finished:  # cancelled while the app ran: nothing more to say
            self._settle(outcome)

    def _refused(self, error: MrtrError) -> None:
        if isinstance(error, CapabilityRequired):
            self._finish_error(
                "the client did not declare what this tool needs to ask", data=error.data
            )
        else:
            self._finish(error_response(self.request.id, error))

    def _settle(self, outcome: Mapping[str, Any] | MrtrError) -> None:
        if isinstance(outcome, MrtrError):
            # Answered, not raised again: raised here, its traceback would hold this
            # frame and this frame the error, a cycle that keeps the request (its
            # params, up to a whole body) until the collector's next full pass.
            self._refused(outcome)
            return
        try:
            if outcome.get("resultType") != "input_required":
                self._finish(ResultResponse(id=self.request.id, result=dict(outcome)))
                return
            shaped = structure_input_required(outcome, self.input_kinds)
            asks = shaped.input_requests or {}
            missing = required_capabilities(asks, self.info.capabilities, self.input_kinds)
            if missing:
                raise CapabilityRequired(missing)
        except MrtrError as exc:
            self._refused(exc)
            return
        self.rounds += 1
        # Two separate bounds, as in RoundEngine: load shedding (state only) does not
        # use up the rounds of questions, nor do questions reset the state-only count.
        if asks:
            self.input_rounds += 1
            if self.input_rounds > self.max_rounds:
                self._finish_error(f"the tool needed more than {self.max_rounds} rounds of input")
                return
        else:
            self.state_only_rounds += 1
            if self.state_only_rounds > self.max_state_only_rounds:
                self._finish_error(
                    f"the tool returned more than {self.max_state_only_rounds} "
                    "requestState-only rounds (max_state_only_rounds)"
                )
                return
        self._state = shaped.request_state
        if not asks:
            # requestState only: come back after a pause, growing while nothing is asked.
            self._pace = PACE_FIRST if self._pace is None else min(self._pace * 2, PACE_CAP)
            self._events.append(ShimWait(delay=self._pace))
            return
        self._pace = None
        self._kinds = {key: self.input_kinds.kind_for(ask).name for key, ask in asks.items()}
        for key, ask in asks.items():
            request = legacy_request(self.new_id(), ask, self.input_kinds)
            self._asked[request.id] = key
            self._events.append(ShimSend(message=request))

    def _finish_error(self, message: str, data: Any = None) -> None:
        error = ErrorObject(code=INTERNAL_ERROR, message=message, data=data)
        self._finish(ErrorResponse(id=self.request.id, error=error))

    def _finish(self, response: ResultResponse | ErrorResponse) -> None:
        self.finished = True
        self._events.append(ShimDone(response=response))
