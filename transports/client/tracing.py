"""The client's trace: one :class:`TraceRecord` for every JSON-RPC message sent or received.

The model: a client with a ``tracer`` hands it one record per message, in the
order the messages crossed the link.  A message is recorded as sent once the
link has really transmitted it (a link that confirms transmission, such as
HTTP, reports it: a message the link refused, or a POST that never left,
is not recorded).  Received bytes are split into messages the way the link
frames them, and each is decoded for the record (a message that is not JSON
is recorded as ``{"unreadable": ...}``).

``flow`` and ``round`` tie a message to a call: a sent leg carries them, and a
received message finds them through its id (a response) or its progress token
(a notification), from the last :data:`MAX_TRACE_IDS` ids sent.

:class:`TraceRecord` is the one record type: ``mrtr call --trace``
(:mod:`mrtr_transports.cli.trace`) writes these records as NDJSON.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

import mrtr_core as m

__all__ = ["MAX_TRACE_IDS", "TraceBook", "TraceRecord", "Tracer", "decode_message"]

logger = logging.getLogger("mrtr.client")

#: Request ids remembered for tracing (which flow and round a response belongs to).
MAX_TRACE_IDS = 4096


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One JSON-RPC message sent or received.

    ``flow`` is the call's handle (``None`` for handshake steps and plain
    requests).  ``round`` is the round a leg belongs to: 0 for the first leg,
    then the round whose answers (or ``requestState``) a retry carries; a
    received result has its leg's round, except an ``input_required`` one, which
    has the number of the round it opens (so it pairs with the retry that
    answers it).  ``t`` is the loop's clock (``anyio.current_time()``).
    """

    dir: Literal["send", "recv"]
    t: float
    flow: int | None
    round: int | None
    msg: dict[str, Any]


Tracer = Callable[[TraceRecord], None]


def decode_message(data: bytes | bytearray) -> dict[str, Any]:
    """One message as a JSON object (``{"unreadable": ...}`` when it is not one)."""
    try:
        value = m.wire._codec.default_codec.loads(data)
    except m.MrtrError:
        return {"unreadable": data[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"unreadable": repr(value)[:200]}


class TraceBook:
    """Turns a client's traffic into :class:`TraceRecord` s for ``tracer``.

    ``framing`` is the link's: ``"lines"`` when received bytes are a stream of
    lines, ``"messages"`` when each piece is one message.
    """

    def __init__(
        self,
        tracer: Tracer,
        *,
        framing: Literal["lines", "messages"],
        max_message_size: int = m._connection._options.DEFAULT_MAX_MESSAGE_SIZE,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self._tracer = tracer
        self._clock = clock  # (the client's, looked up once: _loop.py)
        self._ids: OrderedDict[m.RequestId, tuple[int | None, int | None]] = OrderedDict()
        self._framer = (
            m.wire.LineFramer(
                max_message_size=max_message_size, max_buffer_size=4 * max_message_size
            )
            if framing == "lines"
            else None
        )

    def remember(self, request_id: m.RequestId, flow: int | None, round_: int | None) -> None:
        """``request_id`` (sent now) belongs to ``flow``, ``round_``: for what answers it."""
        self._ids[request_id] = (flow, round_)
        while len(self._ids) > MAX_TRACE_IDS:
            self._ids.popitem(last=False)

    def sent(self, flow: int | None, round_: int | None, message: dict[str, Any]) -> None:
        """Record ``message`` as transmitted."""
        self._record("send", flow, round_, message)

    def received(self, data: bytes | bytearray) -> None:
        """Record every message in ``data`` (bytes from the link)."""
        framer = self._framer
        if framer is None:
            self._received_message(data)
            return
        framer.feed(data)
        while isinstance(frame := framer.next_frame(), (bytes, m.wire.Oversize)):
            if isinstance(frame, bytes):
                self._received_message(frame)

    def _received_message(self, data: bytes | bytearray) -> None:
        message = decode_message(data)
        flow: int | None = None
        round_: int | None = None
        if "method" in message:
            params = message.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            if isinstance(token, (str, int)):
                flow, round_ = self._ids.get(token, (None, None))
        elif isinstance(message.get("id"), (str, int)):
            flow, round_ = self._ids.get(message["id"], (None, None))
            result = message.get("result")
            if (
                round_ is not None
                and isinstance(result, dict)
                and result.get("resultType") == "input_required"
            ):
                round_ += 1
        self._record("recv", flow, round_, message)

    def _record(
        self,
        direction: Literal["send", "recv"],
        flow: int | None,
        round_: int | None,
        message: dict[str, Any],
    ) -> None:
        record = TraceRecord(direction, self._clock(), flow, round_, message)
        try:
            self._tracer(record)
        except Exception:
            logger.exception("the tracer failed")
