"""Running a server handler for one leg: verified state in, a result or a sealed ask out.

``run_handler(handler, request, info, sealer=..., principal=..., now=...)`` is
the whole server side of a multi round-trip leg, for any process that gets it:

1. a ``requestState`` in the params is opened with the sealer; a forged,
   expired or misdirected one raises :class:`~mrtr_core.server.InvalidRequestState`
   and the handler never runs;
2. the handler runs with a :class:`HandlerContext` (the answers, the verified state,
   the request's capabilities) and returns a result mapping or an :class:`Ask`;
3. an ask becomes an ``input_required`` result whose state is sealed again,
   bound to this method, these params and this principal.

Three handler styles share it (see ``docs/server.md``): a plain re-entrant
function, the ``once`` guard for side effects, and :class:`Steps`.

Every sealed state of one flow carries the same random flow id and the flow's
deadline (``flow_ttl`` after its first leg, an hour by default): no token of
the flow is sealed to outlive it, however often older states are replayed.
With a single-use store on the sealer, ``once`` guards and the final step of
:class:`Steps` spend ``<flow id>:<name>`` in it, kept until that deadline,
before running, so they run at most once per flow even against a client that
replays an older state (which carries the same flow id).  A request without
state starts a new flow: calling the tool again is a new action.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .._errors import LocalProtocolError
from ..protocol._meta import RequestInfo
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import InputRequest, InputResponse, Request
from ._asking import Answers, CapabilityRequired, input_required, required_capabilities
from ._sealing import InvalidRequestState, OpenedState, StateSealer

DEFAULT_FLOW_TTL = 3600.0


@attrs.frozen(kw_only=True)
class Ask:
    """A handler's "not yet": ask for ``requests`` and come back with ``state``."""

    requests: Mapping[str, InputRequest] = attrs.field(factory=dict)
    state: Any = None


@attrs.frozen
class Next:
    """A :class:`Steps` step is done: go on with ``data``, after asking ``ask`` if any.

    ``Next(data, ask={...})``: the one positional field reads naturally in a step.
    """

    data: Any = None
    ask: Mapping[str, InputRequest] | None = attrs.field(default=None, kw_only=True)


HandlerResult = Mapping[str, Any] | Ask
Handler = Callable[["HandlerContext"], HandlerResult]


class HandlerContext:
    """What a handler sees for one leg.

    ``input_kinds`` is the registry of what the handler may ask (and how each
    answer reads): the standard kinds unless the server knows more.
    """

    def __init__(
        self,
        request: Request,
        info: RequestInfo,
        *,
        opened: OpenedState | None,
        flow: str,
        deadline: float,
        guards: list[str],
        state: Any,
        sealer: StateSealer | None,
        principal: str | None,
        now: float,
        input_kinds: InputRegistry = INPUT_KINDS,
    ) -> None:
        self.request = request
        self.method = info.method
        self.params: Mapping[str, Any] = request.params or {}
        self.info = info
        self.capabilities = info.capabilities
        self.principal = principal
        self.now = now
        #: The verified state value of the previous round (``None`` on the first leg).
        self.state = state
        self.opened = opened
        self.flow = flow
        #: When this flow ends: no state of it is sealed to live longer.
        self.deadline = deadline
        self.input_kinds = input_kinds
        self.answers = Answers(self.params, input_kinds=input_kinds)
        self._guards = guards
        self._sealer = sealer

    @property
    def arguments(self) -> Mapping[str, Any]:
        """``params.arguments`` (tools and prompts), ``{}`` when absent."""
        found = self.params.get("arguments")
        return found if isinstance(found, Mapping) else {}

    def answer(self, key: str, asked: InputRequest) -> InputResponse | None:
        """The typed answer under ``key`` to ``asked``, or ``None`` (then ask again)."""
        return self.answers.get(key, asked)

    def can_ask(self, *requests: InputRequest) -> bool:
        """Whether this request declared what ``requests`` need."""
        asks = {str(i): r for i, r in enumerate(requests)}
        return not required_capabilities(asks, self.capabilities, self.input_kinds)

    def ask(self, requests: Mapping[str, InputRequest] | None = None, *, state: Any = None) -> Ask:
        """Ask for ``requests`` (all declared by this request, else -32021)."""
        asks = dict(requests or {})
        missing = required_capabilities(asks, self.capabilities, self.input_kinds)
        if missing:
            raise CapabilityRequired(missing)
        return Ask(requests=asks, state=state)

    def once(self, name: str) -> bool:
        """True exactly once per flow for ``name``: guard a side effect with it.

        ``if ctx.once("deploy"): deploy()``.  The guard is recorded in the sealed
        state, so later rounds skip it; with a single-use store it is also spent
        there first, so a replayed older state cannot fire it again (it raises
        ``InvalidRequestState("replayed")`` instead).
        """
        if name in self._guards:
            return False
        self._spend(f"once:{name}")
        self._guards.append(name)
        return True

    def _spend(self, what: str) -> None:
        sealer = self._sealer
        if sealer is None or sealer.store is None:
            return
        # Every token of this flow expires by its deadline, so keeping the record
        # that long outlives any state that could be replayed.
        if not sealer.store.consume(f"{self.flow}:{what}", self.deadline, self.now):
            raise InvalidRequestState("replayed")


def _read_state(opened: OpenedState) -> tuple[str, float, list[str], Any]:
    value = opened.value
    if not (
        isinstance(value, dict)
        and isinstance(value.get("f"), str)
        and isinstance(value.get("d"), (int, float))
        and isinstance(value.get("g"), list)
        and all(isinstance(g, str) for g in value["g"])
    ):
        # Sealed by this key, yet not in our shape: another app's state.
        raise InvalidRequestState("malformed")
    return value["f"], float(value["d"]), list(value["g"]), value.get("v")


def run_handler(
    handler: Handler,
    request: Request,
    info: RequestInfo,
    *,
    sealer: StateSealer | None,
    principal: str | None,
    now: float,
    flow_ttl: float = DEFAULT_FLOW_TTL,
    input_kinds: InputRegistry = INPUT_KINDS,
) -> dict[str, Any]:
    """One leg of ``handler``: the wire result (complete or ``input_required``).

    Raises :class:`~mrtr_core.server.InvalidRequestState` (-32602) before the handler
    runs, or whatever :class:`~mrtr_core.MrtrError` the handler raises
    (``CapabilityRequired`` -32021, ``InvalidAnswer`` -32602); answer those with
    ``error_response(request.id, exc)``.  The same as
    ``close_leg(ctx, handler(ctx))`` with ``ctx = open_leg(...)``.
    """
    ctx = open_leg(
        request,
        info,
        sealer=sealer,
        principal=principal,
        now=now,
        flow_ttl=flow_ttl,
        input_kinds=input_kinds,
    )
    return close_leg(ctx, handler(ctx))


def open_leg(
    request: Request,
    info: RequestInfo,
    *,
    sealer: StateSealer | None,
    principal: str | None,
    now: float,
    flow_ttl: float = DEFAULT_FLOW_TTL,
    input_kinds: InputRegistry = INPUT_KINDS,
) -> HandlerContext:
    """The first half of :func:`run_handler`: verify the state, build the context.

    For handlers that cannot be called synchronously (a coroutine that awaits
    while it streams progress): ``ctx = open_leg(...)``, run the handler your
    way, then ``close_leg(ctx, outcome)``.  Raises ``InvalidRequestState``.
    """
    params = request.params or {}
    token = params.get("requestState")
    opened: OpenedState | None = None
    if token is not None:
        if sealer is None:
            raise InvalidRequestState("unknown_key")  # we never issue state without one
        opened = sealer.open(token, method=info.method, params=params, principal=principal, now=now)
        flow, deadline, guards, state = _read_state(opened)
    else:
        flow, deadline, guards, state = secrets.token_urlsafe(16), now + flow_ttl, [], None
    return HandlerContext(
        request,
        info,
        opened=opened,
        flow=flow,
        deadline=deadline,
        guards=guards,
        state=state,
        sealer=sealer,
        principal=principal,
        now=now,
        input_kinds=input_kinds,
    )


def close_leg(ctx: HandlerContext, outcome: HandlerResult) -> dict[str, Any]:
    """The second half of :func:`run_handler`: a result as it is, an :class:`Ask` sealed."""
    if isinstance(outcome, Ask):
        return _ask(ctx, outcome.requests, outcome.state)
    if isinstance(outcome, Mapping):
        return dict(outcome)
    raise LocalProtocolError(
        f"a handler returns a result mapping or an Ask, not {type(outcome).__name__}"
    )


def _ask(ctx: HandlerContext, requests: Mapping[str, InputRequest], state: Any) -> dict[str, Any]:
    sealer = ctx._sealer
    if sealer is None:
        if state is not None or ctx._guards:
            raise LocalProtocolError("carrying state across rounds needs a StateSealer")
        return input_required(requests, input_kinds=ctx.input_kinds)
    left = ctx.deadline - ctx.now
    if left <= 0:
        raise InvalidRequestState("expired")  # the flow as a whole has run out of time
    token = sealer.seal(
        {"f": ctx.flow, "d": ctx.deadline, "g": ctx._guards, "v": state},
        method=ctx.method,
        params=ctx.params,
        principal=ctx.principal,
        now=ctx.now,
        ttl=min(sealer.ttl, left),
    )
    return input_required(requests, state=token, input_kinds=ctx.input_kinds)


StepFunction = Callable[[HandlerContext, Any], Any]


class Steps:
    """A handler made of named steps run in order; the last one returns the result.

    A step is ``fn(ctx, data)``; ``data`` is what the step before it passed on.
    A step that is not the last returns ``Next(data, ask=...)`` to go on (after
    a round trip when it asks, at once when it does not) or an :class:`Ask`
    (``ctx.ask(...)``, without state) to stay where it is with the same data,
    e.g. to ask again for a missing answer.  The last step returns the result
    mapping and runs at most once per flow: with a single-use store its run is
    spent there first.
    """

    def __init__(self) -> None:
        self._steps: list[tuple[str, StepFunction]] = []

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self._steps)

    def step(
        self, name: str
    ) -> Callable[[Callable[[HandlerContext, Any], Any]], Callable[..., Any]]:
        """Decorator: append a step called ``name`` (names are unique)."""

        def register(
            fn: Callable[[HandlerContext, Any], Any],
        ) -> Callable[[HandlerContext, Any], Any]:
            if name in self.names:
                raise LocalProtocolError(f"step {name!r} is defined twice")
            self._steps.append((name, fn))
            return fn

        return register

    def __call__(self, ctx: HandlerContext) -> HandlerResult:
        if not self._steps:
            raise LocalProtocolError("Steps has no steps")
        where = ctx.state if isinstance(ctx.state, dict) else {"step": self._steps[0][0]}
        index = self.names.index(where["step"]) if where.get("step") in self.names else -1
        if index < 0:
            raise InvalidRequestState("malformed")  # a state from another version of the flow
        data = where.get("data")
        last = len(self._steps) - 1
        while True:
            name, fn = self._steps[index]
            if index == last:
                ctx._spend(f"step:{name}")
                result = fn(ctx, data)
                if not isinstance(result, Mapping):
                    raise LocalProtocolError(f"the last step {name!r} must return the result")
                return result
            outcome = fn(ctx, data)
            if isinstance(outcome, Ask):
                if outcome.state is not None:
                    raise LocalProtocolError(
                        f"step {name!r} stays with the data it was given; pass data on with Next"
                    )
                return Ask(requests=outcome.requests, state={"step": name, "data": data})
            if not isinstance(outcome, Next):
                raise LocalProtocolError(f"step {name!r} must return Next(...) or an Ask")
            index, data = index + 1, outcome.data
            if outcome.ask:
                asks = ctx.ask(outcome.ask).requests
                return Ask(requests=asks, state={"step": self._steps[index][0], "data": data})
