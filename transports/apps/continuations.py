"""The continuation store: where continuation-style handlers wait between rounds (anyio).

The fourth handler style of ``docs/server.md``, and the only one that keeps
something in a process between rounds.  A handler registered with
``continuation=True`` (``@app.tool(..., continuation=True)``) is a coroutine:
``await ctx.wait_for(...)`` really suspends it until the client's retry brings
the answers.  What the client carries is only a sealed reference to the parked
coroutine (an unguessable continuation token and the round number, sealed by
the app's ``StateSealer`` and bound to method, params and principal like any
sealed state).

Opt-in, with its costs stated: the spec says servers should not require a
client to come back to the same process, and this style does, so a
deployment of several processes needs **sticky routing** (e.g. route on a hash
of the ``requestState``'s key id and payload, or run one process).  A retry
that reaches a process without the continuation gets -32602
``unknown_continuation``, as does one that comes after the idle timeout; a
state of an older round is ``replayed``.

The app owns one store: ``McpApp(..., continuations=ContinuationStore(...))``,
or one with the default bounds, made when the first continuation handler is
registered.  The app has no task group of its own, so each parked handler runs
detached from the request that started it (``_spawn_detached``): a trio system
task on trio, a task of the running loop on asyncio.  It lives until it
returns, fails, is evicted, or the run ends.

Bounds: at most ``max_parked`` handlers are alive at once, at most
``max_parked_per_client`` of them started by one client (``Leg.client``): a new
flow past either is refused with :class:`TooManyParked` (-32000, the bound
named), so one client fills its own share and not the store; a flow stops
counting before its result goes out, so the client may start the next one at
once.  A
parked handler that waits longer than ``idle_timeout`` is cancelled and
evicted.

When a leg's stream closes: a *parked* handler is not running, so nothing
happens to it; it keeps waiting for a retry until the idle timeout.  If the
stream closes while the handler *runs* (between receiving answers and its
next ask or result), the leg is cancelled and the handler is cancelled with
it: its continuation is gone, and a re-issued leg gets
``unknown_continuation``, so the client starts the call over.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import anyio
import attrs
import sniffio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

import mrtr_core as m

from .._shares import LOCAL_CLIENT, ClientShares
from ..auth.identity import Identity
from ..server.app import Outlet

#: The store's bound, and one client's share of it.
DEFAULT_MAX_PARKED = 1000
DEFAULT_MAX_PARKED_PER_CLIENT = 50


class TooManyParked(m.MrtrError):
    """-32000: the client's share (``max_parked_per_client``) or the store's bound
    (``max_parked``) of handlers are already waiting for their clients."""

    code = m.ErrorCode.SERVER_BUSY


@attrs.frozen
class Leg:
    """One request of a continuation flow: what the store seals its reference to, and
    what the handler's context switches to when this request resumes it."""

    request: m.Request
    info: m.server.RequestInfo
    outlet: Outlet
    principal: str | None
    #: The app's clock (sealed states expire by it).
    now: float
    #: Who sent it (``Context.client``): whose share a new flow counts against.
    client: str = LOCAL_CLIENT
    #: The verified caller (``Context.identity``), where the transport authenticates.
    identity: Identity | None = None

    @property
    def params(self) -> Mapping[str, Any]:
        return self.request.params or {}


@attrs.frozen
class _Asked:
    requests: Mapping[str, m.wire.InputRequest]


@attrs.frozen
class _Finished:
    result: Mapping[str, Any]


@attrs.frozen
class _Raised:
    error: BaseException


_Outcome = _Asked | _Finished | _Raised


class _Parked:
    """One handler task and the two channels that talk to it."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.scope = anyio.CancelScope()
        self.to_handler: MemoryObjectSendStream[Leg]
        self.legs: MemoryObjectReceiveStream[Leg]
        self.to_handler, self.legs = anyio.create_memory_object_stream[Leg](1)
        self.to_store: MemoryObjectSendStream[_Outcome]
        self.outcomes: MemoryObjectReceiveStream[_Outcome]
        self.to_store, self.outcomes = anyio.create_memory_object_stream[_Outcome](1)
        self.busy = True  # running a leg (not waiting for the client)
        self.round = 0  # which ask the client's next state must name
        self.client = ""  # whose share it counts against


class Suspension:
    """The handler's side of its parked flow (what ``Context.wait_for`` suspends on)."""

    def __init__(self, parked: _Parked) -> None:
        self._parked = parked

    async def suspend(self, requests: Mapping[str, m.wire.InputRequest]) -> Leg:
        """End this leg with an ``input_required`` round asking ``requests``, and wait,
        parked, for the leg that brings the answers."""
        await self._parked.to_store.send(_Asked(dict(requests)))
        return await self._parked.legs.receive()


#: What the store runs for a new flow: the handler, with its suspension, to the wire result.
Run = Callable[[Suspension], Awaitable[Mapping[str, Any]]]


class ContinuationStore:
    """The parked handlers of an app, bounded by ``max_parked`` (``max_parked_per_client``
    for one client) and ``idle_timeout``."""

    def __init__(
        self,
        *,
        max_parked: int = DEFAULT_MAX_PARKED,
        idle_timeout: float = 300.0,
        max_parked_per_client: int = DEFAULT_MAX_PARKED_PER_CLIENT,
    ) -> None:
        if max_parked < 1 or not idle_timeout > 0 or max_parked_per_client < 1:
            raise m.LocalProtocolError(
                "max_parked, max_parked_per_client and idle_timeout must be positive"
            )
        self.max_parked = max_parked
        self.idle_timeout = idle_timeout
        self.shares = ClientShares(
            max_parked,
            max_parked_per_client,
            what="parked continuation handlers",
            total_setting="max_parked",
            per_client_setting="max_parked_per_client",
        )
        self._parked: dict[str, _Parked] = {}

    def __len__(self) -> int:
        """Handlers alive (parked, or running a leg)."""
        return len(self._parked)

    async def start(self, run: Run, leg: Leg, *, sealer: m.server.StateSealer) -> dict[str, Any]:
        """The first leg of a flow: start ``run`` in a task of its own, and return its
        first ask (sealed) or its result.  Raises :class:`TooManyParked` past the client's
        share or the store's bound."""
        refused = self.shares.admit(leg.client)
        if refused is not None:
            raise refused.error(TooManyParked)
        parked = _Parked(secrets.token_urlsafe(32))
        parked.client = leg.client
        self._parked[parked.token] = parked
        _spawn_detached(self._run(run, parked))
        return await self._next_outcome(parked, leg, sealer)

    async def resume(self, leg: Leg, *, sealer: m.server.StateSealer) -> dict[str, Any]:
        """A retry: hand ``leg`` (with its answers) to the handler its state names, and
        return the handler's next ask or its result.  Raises ``InvalidRequestState``."""
        opened = sealer.open(
            leg.params.get("requestState"),
            method=leg.info.method,
            params=leg.params,
            principal=leg.principal,
            now=leg.now,
        )
        value = opened.value if isinstance(opened.value, dict) else {}
        key = value.get("c")
        parked = self._parked.get(key) if isinstance(key, str) else None
        if parked is None or parked.busy:
            raise m.server.InvalidRequestState("unknown_continuation")
        if value.get("r") != parked.round:
            raise m.server.InvalidRequestState("replayed")  # an older round's state
        parked.busy = True
        parked.scope.deadline = math.inf  # running again: no idle timeout
        parked.to_handler.send_nowait(leg)
        return await self._next_outcome(parked, leg, sealer)

    async def _next_outcome(
        self, parked: _Parked, leg: Leg, sealer: m.server.StateSealer
    ) -> dict[str, Any]:
        try:
            outcome = await parked.outcomes.receive()
        except anyio.get_cancelled_exc_class():
            # The leg's stream closed while the handler ran: it goes with it.
            parked.scope.cancel()
            raise
        if isinstance(outcome, _Asked):
            parked.busy = False
            parked.round += 1
            parked.scope.deadline = anyio.current_time() + self.idle_timeout
            sealed = sealer.seal(
                {"c": parked.token, "r": parked.round},
                method=leg.info.method,
                params=leg.params,
                principal=leg.principal,
                now=leg.now,
            )
            return m.server.input_required(outcome.requests, state=sealed)
        if isinstance(outcome, _Finished):
            return dict(outcome.result)
        raise outcome.error

    async def _run(self, run: Run, parked: _Parked) -> None:
        try:
            with parked.scope:
                outcome: _Outcome
                try:
                    outcome = _Finished(await run(Suspension(parked)))
                except m.MrtrError as exc:
                    outcome = _Raised(exc)
                except Exception as exc:  # a bug in the handler must not take the server down
                    outcome = _Raised(m.MrtrError(f"the handler failed: {exc!r}"))
                # Stop counting the flow before its last outcome reaches the client, who
                # may start the next flow at once: that one must find the room this held.
                self._forget(parked)
                parked.to_store.send_nowait(outcome)
        finally:
            self._forget(parked)  # cancelled or evicted: nothing more to send

    def _forget(self, parked: _Parked) -> None:
        if self._parked.pop(parked.token, None) is not None:
            self.shares.release(parked.client)


#: The detached tasks running on asyncio (the loop keeps only weak references).
_detached: set[asyncio.Task[None]] = set()


def _spawn_detached(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` in a task of its own that outlives the request starting it."""
    if sniffio.current_async_library() == "trio":
        import trio  # (only on trio: its system tasks are what this is)

        async def run() -> None:
            await coro

        trio.lowlevel.spawn_system_task(run)
        return
    task = asyncio.get_running_loop().create_task(coro)
    _detached.add(task)
    task.add_done_callback(_detached.discard)


__all__ = [
    "DEFAULT_MAX_PARKED",
    "DEFAULT_MAX_PARKED_PER_CLIENT",
    "ContinuationStore",
    "Leg",
    "Suspension",
    "TooManyParked",
]
