"""The continuation store: handlers that ``await`` the user's answers (trio).

The fourth handler style, and the only one that keeps something in a process
between rounds: the handler is a coroutine, and ``await ctx.ask(...)`` really
suspends it until the client's retry brings the answers.  What the client
carries is only a sealed reference to the parked coroutine (an unguessable
continuation token inside a ``StateSealer`` token, bound to method, params
and principal like any sealed state).

Opt-in, with its costs stated: the spec says servers should not require a
client to come back to the same process, and this style does, so a
deployment of several processes needs **sticky routing** (e.g. route on a hash
of the ``requestState``'s key id and payload, or run one process).  A retry
that reaches a process without the continuation gets -32602
``unknown_continuation``, as does one that comes after the idle timeout.

Bounds: at most ``max_parked`` handlers wait at once (a new flow past that is
refused with :class:`TooManyParked`, -32603); a parked handler that waits
longer than ``idle_timeout`` is cancelled and evicted.

When a leg's stream closes: a *parked* handler is not running, so nothing
happens to it; it keeps waiting for a retry until the idle timeout.  If the
stream closes while the handler *runs* (between receiving answers and its
next ask or result), ``handle`` is cancelled and the handler is cancelled with
it: its continuation is gone, and a re-issued leg gets
``unknown_continuation``, so the client starts the call over.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

import mrtr_core as m


class TooManyParked(m.MrtrError):
    """-32603: ``max_parked`` handlers are already waiting for their clients."""


@attrs.frozen
class _Asked:
    requests: Mapping[str, m.InputRequest]


@attrs.frozen
class _Finished:
    result: Mapping[str, Any]


@attrs.frozen
class _Raised:
    error: BaseException


_Outcome = _Asked | _Finished | _Raised


class _Parked:
    """One handler coroutine and the two channels that talk to it."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.scope = trio.CancelScope()
        self.to_handler, self.answers = trio.open_memory_channel[m.Answers](1)
        self.to_store, self.outcomes = trio.open_memory_channel[_Outcome](1)
        self.busy = False
        self.round = 0  # which ask the client's next state must name


class SuspendingContext:
    """What a continuation-style handler sees; ``await ctx.ask(...)`` suspends it."""

    def __init__(
        self,
        store: ContinuationStore,
        parked: _Parked,
        request: m.Request,
        info: m.RequestInfo,
        principal: str | None,
    ) -> None:
        self._store = store
        self._parked = parked
        self.request = request
        self.params: Mapping[str, Any] = request.params or {}
        self.info = info
        self.capabilities = info.capabilities
        self.principal = principal

    @property
    def arguments(self) -> Mapping[str, Any]:
        found = self.params.get("arguments")
        return found if isinstance(found, Mapping) else {}

    def can_ask(self, *requests: m.InputRequest) -> bool:
        asks = {str(i): r for i, r in enumerate(requests)}
        return not m.required_capabilities(asks, self.capabilities)

    async def ask(self, requests: Mapping[str, m.InputRequest]) -> m.Answers:
        """Ask the client and wait (parked) for the answers of the next leg."""
        asks = dict(requests)
        missing = m.required_capabilities(asks, self.capabilities)
        if missing:
            raise m.CapabilityRequired(missing)
        await self._parked.to_store.send(_Asked(asks))
        return await self._parked.answers.receive()

    async def elicit(self, key: str, request: m.InputRequest) -> m.InputResponse:
        """Ask one question under ``key`` until the client answers it; the typed answer."""
        while True:
            answer = (await self.ask({key: request})).get(key, request)
            if answer is not None:
                return answer


Handler = Callable[[SuspendingContext], Awaitable[Mapping[str, Any]]]


class ContinuationStore:
    """Parks handler coroutines between rounds, in ``nursery``.

    ``handle(handler, request, info, principal=...)`` serves one leg and
    returns the wire result (complete or ``input_required``), or raises the
    :class:`mrtr_core.MrtrError` the client should get.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        sealer: m.StateSealer,
        *,
        max_parked: int = 1000,
        idle_timeout: float = 300.0,
    ) -> None:
        if max_parked < 1 or not idle_timeout > 0:
            raise m.LocalProtocolError("max_parked and idle_timeout must be positive")
        self._nursery = nursery
        self.sealer = sealer
        self.max_parked = max_parked
        self.idle_timeout = idle_timeout
        self._parked: dict[str, _Parked] = {}

    def __len__(self) -> int:
        """Handlers alive (parked, or running a leg)."""
        return len(self._parked)

    async def handle(
        self,
        handler: Handler,
        request: m.Request,
        info: m.RequestInfo,
        *,
        principal: str | None,
    ) -> dict[str, Any]:
        params = request.params or {}
        now = trio.current_time()
        token = params.get("requestState")
        if token is None:
            parked = self._start(handler, request, info, principal)
        else:
            opened = self.sealer.open(
                token, method=info.method, params=params, principal=principal, now=now
            )
            value = opened.value if isinstance(opened.value, dict) else {}
            key = value.get("c")
            found = self._parked.get(key) if isinstance(key, str) else None
            if found is None or found.busy:
                raise m.InvalidRequestState("unknown_continuation")
            if value.get("r") != found.round:
                raise m.InvalidRequestState("replayed")  # an older round's state
            parked = found
            parked.busy = True
            parked.scope.deadline = math.inf  # running again: no idle timeout
            parked.to_handler.send_nowait(m.Answers(params))
        try:
            outcome = await parked.outcomes.receive()
        except trio.Cancelled:
            # The leg's stream closed while the handler ran: it goes with it.
            parked.scope.cancel()
            raise
        if isinstance(outcome, _Asked):
            parked.busy = False
            parked.round += 1
            parked.scope.deadline = trio.current_time() + self.idle_timeout
            sealed = self.sealer.seal(
                {"c": parked.token, "r": parked.round},
                method=info.method,
                params=params,
                principal=principal,
                now=now,
            )
            return m.input_required(outcome.requests, state=sealed)
        if isinstance(outcome, _Finished):
            return dict(outcome.result)
        raise outcome.error

    def _start(
        self, handler: Handler, request: m.Request, info: m.RequestInfo, principal: str | None
    ) -> _Parked:
        if len(self._parked) >= self.max_parked:
            raise TooManyParked(
                f"{self.max_parked} handlers are already waiting for their clients; "
                "raise max_parked or lower idle_timeout",
            )
        parked = _Parked(secrets.token_urlsafe(32))
        parked.busy = True
        self._parked[parked.token] = parked
        ctx = SuspendingContext(self, parked, request, info, principal)
        self._nursery.start_soon(self._run, handler, ctx, parked)
        return parked

    async def _run(self, handler: Handler, ctx: SuspendingContext, parked: _Parked) -> None:
        try:
            with parked.scope:
                try:
                    result = await handler(ctx)
                except m.MrtrError as exc:
                    await parked.to_store.send(_Raised(exc))
                except Exception as exc:  # a bug in the handler must not take the server down
                    failure = m.MrtrError(f"the handler failed: {exc!r}")
                    await parked.to_store.send(_Raised(failure))
                else:
                    await parked.to_store.send(_Finished(result))
        finally:
            del self._parked[parked.token]  # finished, failed, cancelled or evicted
