"""The client's call table: every live multi round-trip call and the legs it has on the wire.

A call is a :class:`~mrtr_core.engine.RoundEngine` plus what the connection keeps for
it: the leg waiting to be sent, the id of the leg in flight, its progress
tokens.  The table also owns the ready queue (calls whose engine may have an
event to hand out), the progress routes (token -> call and request), and the
ids a ``CancelLeg`` still has to name on the wire.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from .._errors import INVALID_PARAMS, LocalProtocolError, MrtrError, RemoteProtocolError, describe
from .._wait import Wait
from ..engine._engine import RoundEngine
from ..engine._events import (
    TERMINAL_EVENTS,
    CancelInputs,
    CancelLeg,
    DispatchInput,
    EngineEvent,
    Failed,
    RoundStarted,
    SendRequest,
    SendRetry,
)
from ..engine._state import TERMINAL_STATES as ENGINE_TERMINAL_STATES
from ..engine._state import EngineState
from ..wire._codec import Codec
from ..wire._model import ErrorResponse, Message, Notification, Request, RequestId, ResultResponse
from ..wire._splice import join_objects, request_bytes
from ._events import CallEvent, InvalidMessage, Progress
from ._handshake import Agreement, version_to_retry
from ._requests import MetaStamp, OutgoingKind, OutgoingTable

T = TypeVar("T")

_ROUND_FIELDS = ("inputResponses", "requestState")
#: Engine events the table only hands on: it records nothing for them.
_FOR_THE_APP = frozenset({RoundStarted, DispatchInput, CancelInputs})


class Call:
    __slots__ = (
        "base_json",
        "base_len",
        "engine",
        "id",
        "last_send",
        "leg_id",
        "meta",
        "meta_key",
        "method",
        "method_json",
        "pending_send",
        "progress",
        "tokens",
        "version_retried",
    )

    def __init__(self, call_id: int, method: str, engine: RoundEngine, progress: bool) -> None:
        self.id = call_id
        self.method = method
        self.engine = engine  # its capabilities are the ones each leg declares
        self.progress = progress
        self.pending_send: SendRequest | SendRetry | None = None
        self.last_send: SendRequest | SendRetry | None = None
        self.leg_id: RequestId | None = None
        self.tokens: list[RequestId] = []
        self.version_retried = False
        # The legs' stamped _meta, for the era and version it was stamped under: one dict
        # for every leg, not a copy per leg.
        self.meta: dict[str, Any] | None = None
        self.meta_key: tuple[str | None, str | None] | None = None
        # What every leg repeats, encoded once (see LegWriter).
        self.method_json = b""
        self.base_json: bytes | None = None
        self.base_len = 0


class LegWriter:
    """Writes a call's legs as bytes, the part every leg repeats encoded once (for a
    codec whose backend writes compact JSON: ``writes_compact``).

    The first leg's params (the original ones, round fields stripped, ``_meta``
    stamped) are kept as bytes; a retry encodes only its round fields and joins
    them on (:func:`~mrtr_core.wire._splice.join_objects`).  The result is what
    encoding the whole request writes, equal in value; when the parts cannot be
    joined (a backend that does not write compact objects) the whole is encoded.
    """

    __slots__ = ("_codec", "_end")

    def __init__(self, codec: Codec, end: bytes) -> None:
        self._codec = codec
        self._end = end

    def write(self, call: Call, request_id: int, params: Mapping[str, Any]) -> bytes:
        """The line for a leg of ``call`` with the engine's ``params`` (not yet stamped:
        the call's ``_meta`` goes into the part encoded once)."""
        dumps = self._codec.dumps
        fields = {key: params[key] for key in _ROUND_FIELDS if key in params}
        if call.base_json is None or len(params) != call.base_len + len(fields):
            base = {k: v for k, v in params.items() if k not in fields} if fields else dict(params)
            if call.meta is not None:
                base["_meta"] = call.meta
            call.base_json = _kept(dumps(base))
            call.base_len = len(params) - len(fields)
        joined = join_objects(call.base_json, dumps(fields) if fields else b"{}")
        if joined is None:  # (not compact objects: the whole request, as send_message has it)
            request = Request(id=request_id, method=call.method, params=_stamped(params, call.meta))
            return self._codec.encode(request) + self._end
        if not call.method_json:
            call.method_json = _kept(dumps(call.method))
        return request_bytes(request_id, call.method_json, joined, self._end)


def _kept(encoded: bytes) -> bytes:
    """``encoded`` in an object of its own size, for the life of a call: orjson's
    output keeps the 4 KiB buffer it was written in (a call's memory went from about
    3 KiB to 12 KiB)."""
    return bytes(memoryview(encoded))


def _stamped(source: Mapping[str, Any], meta: dict[str, Any] | None) -> dict[str, Any]:
    """A leg's params with the call's ``_meta`` (``None``: a 2025 session, none added)."""
    params = dict(source)
    if meta is not None:
        if "_meta" not in source and not source.keys().isdisjoint(_ROUND_FIELDS):
            # The round fields last, after the _meta added here: the order the LegWriter
            # writes, so that send() and send_message() agree byte for byte.
            params = {k: v for k, v in source.items() if k not in _ROUND_FIELDS}
            params["_meta"] = meta
            params.update((k, source[k]) for k in _ROUND_FIELDS if k in source)
        else:
            params["_meta"] = meta
    return params


class CallTable:
    """The live calls of one client connection."""

    __slots__ = (
        "_agreement",
        "_modern_versions",
        "_next_call",
        "_outgoing",
        "calls",
        "cancel_targets",
        "max_calls",
        "progress_routes",
        "ready",
    )

    def __init__(
        self,
        outgoing: OutgoingTable,
        agreement: Agreement,
        modern_versions: Sequence[str],
        max_calls: int,
    ) -> None:
        self._outgoing = outgoing
        self._agreement = agreement
        self._modern_versions = modern_versions
        self.max_calls = max_calls
        self.calls: dict[int, Call] = {}
        self.ready: deque[int] = deque()
        #: progress token -> (call or None for a plain request, request id)
        self.progress_routes: dict[RequestId, tuple[int | None, RequestId]] = {}
        #: (call, leg) -> the id its ``CancelLeg`` names on the wire
        self.cancel_targets: dict[tuple[int, int], RequestId] = {}
        self._next_call = 1

    # --- Starting and feeding calls ------------------------------------------------------

    def check_room(self) -> None:
        if len(self.calls) >= self.max_calls:
            raise LocalProtocolError(f"more than max_calls={self.max_calls} calls in flight")

    def start(self, method: str, engine: RoundEngine, progress: bool) -> int:
        call_id = self._next_call
        self._next_call += 1
        self.calls[call_id] = Call(call_id, method, engine, progress)
        self.ready.append(call_id)
        return call_id

    def ever_started(self, call: int) -> bool:
        """Whether ``call`` is a handle this table gave out (live or ended)."""
        return isinstance(call, int) and 0 < call < self._next_call

    def live(self, call: int) -> Call | None:
        """The live call ``call`` names (``None`` for anything else the app passes)."""
        return self.calls.get(call) if isinstance(call, int) else None

    def find(self, call: int) -> Call:
        found = self.calls.get(call) if isinstance(call, int) else None  # (live, inlined)
        if found is None:
            raise LocalProtocolError(f"no call {describe(call)} in flight")
        return found

    def engine_input(self, call: int) -> RoundEngine:
        """The engine of a live call about to take an input: it may have events after."""
        found = self.find(call)
        self.ready.append(call)
        return found.engine

    def break_leg(self, call: int) -> RoundEngine:
        """The leg on the wire broke: it is abandoned; the engine (to re-issue it) is returned.

        Only a leg that was sent and is still waiting for its answer can break.  With
        none (not sent yet, answered, cancelled, or the flow waits for input or has
        ended) it is a ``LocalProtocolError`` and nothing changes: a re-issue then
        would put a second leg of the call on the wire.
        """
        found = self.find(call)
        if found.leg_id is None or found.engine.state is not EngineState.AWAITING_RESULT:
            raise LocalProtocolError(f"call {describe(call)} has no leg on the wire to break")
        self.abandon_leg(found)
        return self.engine_input(call)

    # --- Handing events out ----------------------------------------------------------------

    def next_event(self) -> CallEvent | None:
        ready = self.ready
        while ready:
            call = self.calls.get(ready[0])
            if call is None:
                ready.popleft()
                continue
            event = call.engine.next_event()
            if type(event) in _FOR_THE_APP:  # (the usual event: nothing to record)
                return CallEvent(call=call.id, event=event)  # type: ignore[arg-type]
            if isinstance(event, Wait):
                ready.popleft()
                continue
            if call.engine.state in ENGINE_TERMINAL_STATES and isinstance(
                event, (SendRequest, SendRetry)
            ):
                continue  # cancelled (or ended) before this leg came out: it never goes
            return self._hand_out(call, event)
        return None

    def _hand_out(self, call: Call, event: EngineEvent) -> CallEvent:
        if isinstance(event, (SendRequest, SendRetry)):
            # (A re-issued leg's broken predecessor was abandoned by leg_broken.)
            call.pending_send = call.last_send = event
        elif isinstance(event, CancelLeg):
            call.pending_send = None  # a retry still waiting out its delay is simply not sent
            if call.leg_id is not None:
                self.cancel_targets[(call.id, event.leg)] = call.leg_id
                while len(self.cancel_targets) > self._outgoing.finished.limit:
                    del self.cancel_targets[next(iter(self.cancel_targets))]
                self.abandon_leg(call)
        else:  # an end (the events the table only hands on went out in next_event)
            self.end(call)
        return CallEvent(call=call.id, event=event)

    def end(self, call: Call) -> None:
        self.abandon_leg(call)
        for token in call.tokens:
            self.progress_routes.pop(token, None)
        del self.calls[call.id]

    def abandon_leg(self, call: Call) -> None:
        if call.leg_id is not None:
            self._outgoing.abandon(call.leg_id)
            call.leg_id = None

    def fail_all(self, error: MrtrError, now: float) -> list[CallEvent]:
        """End every live call with ``Failed(error)`` (or with the end it already reached)."""
        out: list[CallEvent] = []
        for call in list(self.calls.values()):
            engine = call.engine
            event: EngineEvent = Failed(error=error)
            if engine.state in ENGINE_TERMINAL_STATES:
                # It ended (a cancel) before its end was handed out: that end stands.  A
                # flow killed by misuse has no end queued, only moot legs: it fails.
                while not isinstance(queued := engine.next_event(), Wait):
                    if isinstance(queued, TERMINAL_EVENTS):
                        event = queued
            else:
                engine.cancel(now)  # its own events are moot
            self.end(call)
            out.append(CallEvent(call=call.id, event=event))
        return out

    # --- Legs on the wire ------------------------------------------------------------------

    def send(
        self,
        event: CallEvent,
        emit: Callable[[Message], T],
        stamp: MetaStamp,
        *,
        notify_cancel: bool,
        session_open: bool,
        writer: LegWriter | None = None,
    ) -> T | None:
        """``emit`` what a call's send event puts on the wire (``None``: nothing is due).

        A leg goes out under a fresh id with ``_meta`` (and a progress token); a
        ``CancelLeg`` becomes ``notifications/cancelled`` for the leg's id when
        ``notify_cancel`` (otherwise the transport closes the leg's stream).  With a
        ``writer`` (``emit`` then encodes: the caller wants bytes) a leg without a
        progress token is written by it instead.
        """
        inner = event.event
        if isinstance(inner, CancelLeg):
            rid = self.cancel_targets.pop((event.call, inner.leg), None)
            if rid is None or not notify_cancel:
                return None  # the leg never went, or the transport closes its stream instead
            return emit(Notification(method="notifications/cancelled", params={"requestId": rid}))
        if not isinstance(inner, (SendRequest, SendRetry)):
            raise LocalProtocolError(f"{type(inner).__name__} is for the app, not for send()")
        call = self.live(event.call)
        if call is None and self.ever_started(event.call):
            return None  # the call ended (cancelled) while this leg waited: it never goes
        if call is None or call.pending_send is not inner:
            raise LocalProtocolError("this leg is not the one the call is waiting to send")
        if not session_open:
            raise LocalProtocolError("the session is not open")
        self._outgoing.check_room()
        rid = self._outgoing.new_id()
        key = stamp.key
        if call.meta_key != key:
            call.meta = stamp.meta(inner.params.get("_meta"), call.engine.capabilities)
            call.meta_key = key
            call.base_json = None  # stamped for another version: written anew
        if writer is not None and not call.progress:
            out = cast(T, writer.write(call, rid, inner.params))
        else:
            params = _stamped(inner.params, call.meta)
            if call.progress:
                meta = params.get("_meta")
                meta = dict(meta) if isinstance(meta, Mapping) else {}
                meta["progressToken"] = rid
                params["_meta"] = meta
            out = emit(Request(id=rid, method=call.method, params=params))
        if call.progress:
            self.progress_routes[rid] = (call.id, rid)
            call.tokens.append(rid)
        # One leg per call on the wire: a leg re-issued before the one it replaces went
        # out (leg_broken while it was held) makes both go; the older one's answer is late.
        self.abandon_leg(call)
        self._outgoing.add(rid, OutgoingKind.LEG, call.method, call.id)
        # A call has at most one leg in the outgoing table, its leg_id, so no answer can
        # reach a call that has ended.  (The engine issues a leg only once the last one
        # is over; this keeps the table right even if that changed.)
        self.abandon_leg(call)
        call.leg_id = rid
        call.pending_send = None
        return out

    def on_leg_answer(
        self, call_id: int, response: ResultResponse | ErrorResponse, now: float
    ) -> CallEvent | None:
        """Feed a leg's answer to its engine; a -32022 naming a version we speak sends the
        same leg once more with it (the event returned is that leg)."""
        call = self.calls[call_id]
        call.leg_id = None
        if call.engine.state in ENGINE_TERMINAL_STATES:
            return None  # the flow is over (killed by misuse): a late answer, dropped
        if isinstance(response, ErrorResponse):
            error = response.error
            retry_with = version_to_retry(error, self._modern_versions)
            if retry_with is not None and not call.version_retried and call.last_send:
                call.version_retried = True
                self._agreement.protocol_version = retry_with
                call.pending_send = call.last_send
                return CallEvent(call=call.id, event=call.last_send)
            call.engine.receive_error(error, now)
        else:
            call.engine.receive_result(response.result, now)
        self.ready.appendleft(call.id)
        return None

    def on_leg_dropped(self, call_id: int, now: float) -> None:
        """The server cancelled the leg in flight: the engine re-issues it."""
        call = self.calls[call_id]
        call.leg_id = None
        if call.engine.state not in ENGINE_TERMINAL_STATES:  # (over: nothing to re-issue)
            self.engine_input(call_id).leg_broken(now)

    def on_progress(self, params: Mapping[str, Any]) -> Progress | InvalidMessage | None:
        """A ``notifications/progress``, routed to its call or plain request."""
        token = params.get("progressToken")
        value = params.get("progress")
        total = params.get("total")
        message = params.get("message")
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or (
                total is not None
                and (not isinstance(total, (int, float)) or isinstance(total, bool))
            )
            or (message is not None and not isinstance(message, str))
        ):
            return InvalidMessage(
                error=RemoteProtocolError(
                    "notifications/progress needs a numeric progress", code=INVALID_PARAMS
                )
            )
        route = self.progress_routes.get(token) if isinstance(token, (str, int)) else None
        if route is None:
            return None  # late progress for a request that has ended
        call, rid = route
        return Progress(request_id=rid, progress=value, total=total, message=message, call=call)
