"""The round engine's events and its "nothing to hand out" sentinels.

Events are frozen, slotted, keyword-only attrs classes.  The engine queues
them; ``RoundEngine.next_event()`` hands them out one at a time and, when the
queue is empty, returns a :class:`Wait` member saying what it waits for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .._errors import MrtrError
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import InputRequest

TimeoutLimit = Literal["leg", "input", "total"]


def input_kind(request: InputRequest, input_kinds: InputRegistry = INPUT_KINDS) -> str:
    """A short name for what a request asks: its method, ``#url`` for URL elicitation
    (the ``name`` of its entry in the input-kind registry)."""
    return input_kinds.kind_for(request).name


@attrs.frozen(kw_only=True)
class SendRequest:
    """Send the original leg: a request with ``params`` and a fresh JSON-RPC id.

    ``timeout`` (seconds from sending, ``None`` for none) bounds the server's time
    on this leg.  ``reissue`` is true when the previous attempt's stream broke.
    """

    params: Mapping[str, Any]
    timeout: float | None
    leg: int
    reissue: bool = False


@attrs.frozen(kw_only=True)
class SendRetry:
    """Send a retry leg: the same method, a fresh id, these ``params``, after ``delay`` s.

    ``round`` is the round whose answers (or requestState) this leg carries.
    """

    params: Mapping[str, Any]
    timeout: float | None
    delay: float
    round: int
    leg: int
    reissue: bool = False


@attrs.frozen(kw_only=True)
class RoundStarted:
    """An input_required result arrived and was accepted.

    ``kinds`` lists what the round asks (see :func:`input_kind`), empty for a
    requestState-only round.  ``input_timeout`` is how long the app has to answer
    (``input_timeout`` capped by the remaining budget; ``None`` for unbounded).
    """

    round: int
    keys: tuple[str, ...]
    kinds: tuple[str, ...]
    input_timeout: float | None


@attrs.frozen(kw_only=True)
class DispatchInput:
    """Ask the app to fulfil one input request; answer with ``provide(key, ...)``."""

    key: str
    request: InputRequest
    round: int


@attrs.frozen(kw_only=True)
class CancelInputs:
    """Stop asking for these keys: their answers are no longer wanted."""

    keys: tuple[str, ...]


@attrs.frozen(kw_only=True)
class CancelLeg:
    """Cancel the leg in flight on the wire (``notifications/cancelled`` on a stream,
    closing the response stream on HTTP).  If a ``SendRetry`` delay is still
    running, simply do not send that leg."""

    leg: int


@attrs.frozen(kw_only=True)
class Done:
    """Terminal: the complete result (a plain mapping, as received)."""

    result: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class TimedOut:
    """Terminal: ``limit`` (``leg``, ``input`` or ``total``) ran out.

    ``elapsed`` is the time measured against that limit, in seconds: since the
    leg was sent for ``leg``, since the round began for ``input``, since
    ``start`` for ``total``.  ``budget`` is the configured limit (the leg's
    effective timeout, ``input_timeout`` or ``total_timeout``), or ``None`` when
    none was configured and the caller's own timer fired.
    """

    elapsed: float
    budget: float | None
    limit: TimeoutLimit


@attrs.frozen(kw_only=True)
class Failed:
    """Terminal: the flow failed; ``error`` says why (always an :class:`MrtrError`)."""

    error: MrtrError


@attrs.frozen(kw_only=True)
class Cancelled:
    """Terminal: ``cancel()`` was called.  Never turned into a decline answer."""


EngineEvent = (
    SendRequest
    | SendRetry
    | RoundStarted
    | DispatchInput
    | CancelInputs
    | CancelLeg
    | Done
    | TimedOut
    | Failed
    | Cancelled
)
TERMINAL_EVENTS = (Done, TimedOut, Failed, Cancelled)
