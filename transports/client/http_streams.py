"""Reading an SSE stream of the HTTP client, and resuming a 2025 one that broke.

:func:`read_sse` feeds each event's message to the client (bounded by
``max_event_size`` per event, :class:`mrtr_core.http.SseDecoder`), remembers
event ids and ``retry`` (:class:`mrtr_core.http.StreamResumption`), and for
an answer stream stops shortly after the answer is in.  :func:`read_answer_stream`
reads the SSE answer to one POST; in a 2025 session a stream with event ids
that breaks, or ends, before the answer is resumed with GET + ``Last-Event-ID``
(:meth:`~mrtr_transports.client.http_sessions.HttpSession.get`), a bounded
number of times in a row, waiting the server's ``retry`` before each.  A
2026-07-28 stream is never resumed (that era has no resumption: the client
re-issues the leg).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import h11

import mrtr_core as m

from .._loop import LoopTools
from .errors import TransportError
from .http_connection import Broken, Failed, HttpConnection
from .link import LinkClient, Outbound

if TYPE_CHECKING:
    from .http_sessions import HttpSession

logger = logging.getLogger("mrtr.client.http")

#: Seconds to wait for the end of an SSE stream once its answer has arrived.
LINGER_AFTER_ANSWER = 1.0


@dataclass(frozen=True, slots=True)
class SseSink:
    """Where a stream's messages go: the client, the bound on one event, and the loop
    (its clock and cancel scopes).  The HTTP link makes one when it starts."""

    client: LinkClient
    max_event_size: int
    loop: LoopTools


async def read_answer_stream(
    sink: SseSink, out: Outbound, conn: HttpConnection, session: HttpSession | None
) -> None:
    """The SSE answer to ``out``.  2026-07-28 (no ``session``): a broken stream is the
    caller's ``Broken`` (the leg is re-issued).  In a 2025 session a stream with event
    ids that breaks, or ends, before the answer is resumed with GET + ``Last-Event-ID``
    (bounded, see ``http_sessions``); when that is impossible the request fails
    (``Failed``), never re-issued: it may already have had its effects."""
    assert out.request_id is not None
    client, request_id = sink.client, out.request_id
    resumption = m.http.StreamResumption()
    stream: HttpConnection | None = conn
    broke: Broken | None = None
    while True:
        if stream is not None:
            try:
                await read_sse(sink, stream, resumption, stop_when=request_id)
                broke = None
            except Broken as exc:
                broke = exc
            finally:
                if stream is not conn:
                    await stream.aclose()
        if not client.is_waiting_for(request_id) or session is None:
            break
        delay = resumption.next_delay()
        if delay is None:
            break
        logger.info("%s: the stream ended early; resuming in %.1f s", out.method, delay)
        await anyio.sleep(delay)
        try:
            opened = await session.get(resumption.last_event_id)
        except (Broken, Failed) as exc:
            logger.info("%s: resuming failed: %s", out.method, exc)
            stream = None
            continue
        if opened is None:
            break
        stream = opened[0]
    if session is None:
        if broke is not None:
            raise broke
        return
    if client.is_waiting_for(request_id):
        how = f"broke ({broke})" if broke is not None else "ended"
        tried = resumption.attempts
        raise Failed(
            TransportError(
                f"the answer stream to {out.method} {how} before its answer and could not be "
                f"resumed ({'no event id to resume from' if tried == 0 else f'{tried} attempts'})"
                "; not sent again: it may already have had its effects",
                kind="disconnect",
            ),
            broken=False,
        )


async def read_sse(
    sink: SseSink,
    conn: HttpConnection,
    resumption: m.http.StreamResumption,
    *,
    stop_when: m.RequestId | None,
) -> None:
    """Feed every event's message to the client, to the end of the stream (or, with
    ``stop_when``, shortly after the answer to that request is in).  Raises ``Broken``."""
    client, now = sink.client, sink.loop.now
    decoder = m.http.SseDecoder(max_event_size=sink.max_event_size)

    def deliver() -> None:
        while isinstance(event := decoder.next_event(), (m.http._sse.SseEvent, m.wire.Oversize)):
            if isinstance(event, m.wire.Oversize):
                logger.warning("dropped an SSE event of %d+ bytes", event.size)
                continue
            resumption.saw(event.id, event.retry)
            if event.event == "message" and event.data:
                client.receive_data(event.data.encode("utf-8"))
        if (
            stop_when is not None
            and reading.deadline == math.inf
            and not client.is_waiting_for(stop_when)
        ):
            # The answer is in: give the stream a moment to end, then stop reading.
            reading.deadline = now() + LINGER_AFTER_ANSWER

    with sink.loop.cancel_scope() as reading:
        while True:
            event = await conn.next_event()
            if isinstance(event, h11.Data):
                decoder.feed(event.data)
                deliver()
            elif isinstance(event, h11.EndOfMessage):
                decoder.feed_eof()
                deliver()
                return
    # (Only reached when lingering ran out: the connection is not reusable.)
