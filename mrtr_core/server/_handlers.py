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

Every sealed state of one flow carries the same random flow id, the flow's
deadline (``flow_ttl`` after its first leg, an hour by default: no token of the
flow is sealed to outlive it), the guards that fired, and what that leg asked
(``{key: input kind}``), which proves to the next leg that its answers were asked
for (``HandlerContext.proven``; see ``Answers``).

A leg that redeems a state must spend it (its nonce, until the state expires) in
a single-use store before the handler acts: ``HandlerContext.to_spend`` says what,
``record_spend`` takes the store's answer (a second spend is ``replayed``).
``run_handler`` does it with the sealer's sync store; an async host awaits its own
store.  Since every redeemed state is spent once, the states of a flow form a
single chain, so a guard (``once``, the last step of :class:`Steps`) that fired
cannot fire again from a replayed older state.  A leg without state spends
nothing: it starts a new flow, and calling the tool again is a new action.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

import attrs

from .._errors import LocalProtocolError
from .._meta import RequestInfo
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputRequest,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    Request,
)
from ._asking import (
    Answers,
    CapabilityRequired,
    UnprovenAnswer,
    input_required,
    required_capabilities,
)
from ._sealing import InvalidRequestState, NonceStore, OpenedState, StateSealer, params_digest

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


@attrs.frozen
class Redeemed:
    """A state a leg redeemed, as a single-use store spends it: its nonce, kept until
    the state itself expires (no later replay of it can be accepted)."""

    nonce: str
    expires_at: float


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
        proven: Mapping[str, str] | None = None,
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
        #: What the previous leg of this flow asked, by key (the input kind's name),
        #: as its sealed state proves: answers to these are proven.
        self.proven: Mapping[str, str] = dict(proven or {})
        self.answers = Answers(self.params, input_kinds=input_kinds, proven=self.proven)
        self._guards = guards
        self._sealer = sealer
        self._spent = False

    @property
    def arguments(self) -> Mapping[str, Any]:
        """``params.arguments`` (tools and prompts), ``{}`` when absent."""
        found = self.params.get("arguments")
        return found if isinstance(found, Mapping) else {}

    # Typed by the ask, as Answers.get.
    @overload
    def answer(
        self, key: str, asked: ElicitFormRequest | ElicitUrlRequest
    ) -> ElicitResult | None: ...
    @overload
    def answer(self, key: str, asked: CreateMessageRequest) -> CreateMessageResult | None: ...
    @overload
    def answer(self, key: str, asked: ListRootsRequest) -> ListRootsResult | None: ...
    @overload
    def answer(self, key: str, asked: InputRequest) -> InputResponse | None: ...
    def answer(self, key: str, asked: InputRequest) -> InputResponse | None:
        """The typed answer under ``key`` to ``asked``, or ``None`` (then ask again):
        an ``ElicitResult`` for ``elicit_form``/``elicit_url``, a ``CreateMessageResult``
        for ``sample``, a ``ListRootsResult`` for ``list_roots``."""
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

    def require_proof(self) -> None:
        """From now on, an answer no ``requestState`` proves was asked reads as ``None``
        (so the handler asks again).  ``Steps`` turns it on by itself; a tool
        registered with ``require_proof=True`` has it on from the start."""
        self.answers.require_proof = True

    @property
    def to_spend(self) -> Redeemed | None:
        """The state this leg redeemed, while it is not spent yet (``None`` on a leg
        without state, or once spent): spend it before the handler acts."""
        opened = self.opened
        if opened is None or self._spent:
            return None
        return Redeemed(nonce=opened.nonce, expires_at=opened.expires_at)

    def record_spend(self, first: bool) -> None:
        """The single-use store's answer to spending :attr:`to_spend`: a state spent
        before (``first`` false) is a replay, refused as ``InvalidRequestState("replayed")``."""
        if not first:
            raise InvalidRequestState("replayed")
        self._spent = True

    def once(self, name: str) -> bool:
        """True exactly once per flow for ``name``: guard a side effect with it.

        ``if ctx.once("deploy"): deploy()``.  The guard is recorded in the sealed
        state, so later legs skip it.  With a single-use store every redeemed state
        is spent before the handler runs, so a replayed older state cannot reach it
        again (``InvalidRequestState("replayed")``).  It refuses to release after an
        unproven answer was read in this leg (:class:`~mrtr_core.server.UnprovenAnswer`).
        """
        if name in self._guards:
            return False
        self._release()
        self._guards.append(name)
        return True

    def _release(self) -> None:
        """Before a guarded side effect: no unproven answer read, the redeemed state spent."""
        if self.answers.unproven:
            raise UnprovenAnswer(min(self.answers.unproven))
        if self._sealer is not None:
            # A host that opened the leg itself may not have spent it: spend it now.
            spend_redeemed(self, self._sealer.store)


def spend_redeemed(ctx: HandlerContext, store: NonceStore | None) -> None:
    """Spend the state ``ctx`` redeemed (if any, and not spent yet) in ``store``.

    Raises ``InvalidRequestState("replayed")`` if it was spent before, and
    ``NonceStoreFull`` (-32603) from a full store, failing closed.
    """
    # (``to_spend`` without the Redeemed it builds for a host: this runs on every leg.)
    opened = ctx.opened
    if opened is not None and not ctx._spent and store is not None:
        ctx.record_spend(store.consume(opened.nonce, opened.expires_at, ctx.now))


def _read_state(opened: OpenedState) -> tuple[str, float, list[str], dict[str, str], Any]:
    value = opened.value
    if not isinstance(value, dict):
        raise InvalidRequestState("malformed")
    flow, deadline, guards = value.get("f"), value.get("d"), value.get("g")
    # "q" (what the leg asked) may be absent from a state sealed by an older version.
    asked = value.get("q", {})
    if not (
        isinstance(flow, str)
        and isinstance(deadline, (int, float))
        and isinstance(guards, list)
        and all(isinstance(g, str) for g in guards)
        and isinstance(asked, dict)
        and all(isinstance(k, str) for k in asked.values())
    ):
        # Sealed by this key, yet not in our shape: another app's state.
        raise InvalidRequestState("malformed")
    return flow, float(deadline), list(guards), dict(asked), value.get("v")


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
    vouched: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One leg of ``handler``: the wire result (complete or ``input_required``).

    Raises :class:`~mrtr_core.server.InvalidRequestState` (-32602) before the handler
    runs, or whatever :class:`~mrtr_core.MrtrError` the handler raises
    (``CapabilityRequired`` -32021, ``InvalidAnswer`` -32602); answer those with
    ``error_response(request.id, exc)``.  The same as ``ctx = open_leg(...)``,
    ``spend_redeemed(ctx, sealer.store)``, then ``close_leg(ctx, handler(ctx))``.
    """
    ctx = open_leg(
        request,
        info,
        sealer=sealer,
        principal=principal,
        now=now,
        flow_ttl=flow_ttl,
        input_kinds=input_kinds,
        vouched=vouched,
    )
    spend_redeemed(ctx, sealer.store if sealer is not None else None)
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
    vouched: Mapping[str, str] | None = None,
) -> HandlerContext:
    """The first half of :func:`run_handler`: verify the state, build the context.

    For handlers that cannot be called synchronously (a coroutine that awaits
    while it streams progress): ``ctx = open_leg(...)``, spend ``ctx.to_spend``
    in your single-use store (``ctx.record_spend(first)``), run the handler your
    way, then ``close_leg(ctx, outcome)``.  Raises ``InvalidRequestState``.

    ``vouched`` (``{key: input kind name}``) are answers the host knows it asked
    for itself (the 2025 shim, which asked with real requests): proven like those
    the sealed state proves.
    """
    params = request.params or {}
    token = params.get("requestState")
    opened: OpenedState | None = None
    if token is not None:
        if sealer is None:
            raise InvalidRequestState("unknown_key")  # we never issue state without one
        opened = sealer.open(token, method=info.method, params=params, principal=principal, now=now)
        flow, deadline, guards, proven, state = _read_state(opened)
    else:
        flow, deadline, guards, proven, state = (
            secrets.token_urlsafe(16),
            now + flow_ttl,
            [],
            {},
            None,
        )
    proven.update(vouched or {})
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
        proven=proven,
    )


def close_leg(ctx: HandlerContext, outcome: HandlerResult) -> dict[str, Any]:
    """The second half of :func:`run_handler`: a result as it is, an :class:`Ask` sealed."""
    if type(outcome) is dict:  # the common case, before two isinstance checks (one an ABC's)
        return dict(outcome)
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
    # What this leg asked, so the next leg can tell a requested answer from an invented one.
    asked = {key: ctx.input_kinds.kind_for(request).name for key, request in requests.items()}
    # The params were digested when this leg's state was opened: bind the next to the same.
    opened = ctx.opened
    digest = opened.params_digest if opened is not None else None
    token = sealer._seal_digest(
        {"f": ctx.flow, "d": ctx.deadline, "g": ctx._guards, "q": asked, "v": state},
        method=ctx.method,
        digest=digest if digest is not None else params_digest(ctx.params),
        principal=ctx.principal,
        now=ctx.now,
        ttl=min(sealer.ttl, left),
    )
    return input_required(requests, state=token, input_kinds=ctx.input_kinds)


StepFunction = Callable[[HandlerContext, Any], Any]
#: A step as written: ``fn(ctx, data)``, its ``ctx`` the host's context (a subclass of
#: ``HandlerContext``, such as ``McpApp``'s ``Context``), kept as it is by ``step``.
_Step = TypeVar("_Step", bound=Callable[[Any, Any], Any])


class Steps:
    """A handler made of named steps run in order; the last one returns the result.

    A step is ``fn(ctx, data)``; ``data`` is what the step before it passed on.
    A step that is not the last returns ``Next(data, ask=...)`` to go on (after
    a round trip when it asks, at once when it does not) or an :class:`Ask`
    (``ctx.ask(...)``, without state) to stay where it is with the same data,
    e.g. to ask again for a missing answer.  The last step returns the result
    mapping and runs at most once per flow (with a single-use store, which spends
    every redeemed state).

    ``Steps`` requires proof (``ctx.require_proof()``): an answer that no sealed
    state proves was asked reads as ``None``, so a client that invents answers is
    simply asked again, and the last step never runs on one.
    """

    def __init__(self) -> None:
        self._steps: list[tuple[str, StepFunction]] = []

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self._steps)

    def step(self, name: str) -> Callable[[_Step], _Step]:
        """Decorator: append a step called ``name`` (names are unique)."""

        def register(fn: _Step) -> _Step:
            if name in self.names:
                raise LocalProtocolError(f"step {name!r} is defined twice")
            self._steps.append((name, fn))
            return fn

        return register

    def __call__(self, ctx: HandlerContext) -> HandlerResult:
        if not self._steps:
            raise LocalProtocolError("Steps has no steps")
        ctx.require_proof()
        where = ctx.state if isinstance(ctx.state, dict) else {"step": self._steps[0][0]}
        index = self.names.index(where["step"]) if where.get("step") in self.names else -1
        if index < 0:
            raise InvalidRequestState("malformed")  # a state from another version of the flow
        data = where.get("data")
        last = len(self._steps) - 1
        while True:
            name, fn = self._steps[index]
            if index == last:
                ctx._release()
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
