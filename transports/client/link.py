"""What a client hands its link (:class:`Outbound`), what a link must do (:class:`Link`),
and a client opened over a link (:func:`open_client`, with :class:`ClientOptions`).

A link moves one client connection's bytes: ``StdioLink`` (a child process's
pipes) and ``HttpLink`` (one POST per message).  The client calls ``transmit``
for every message, in the order its connection produced them; the link calls
back into the client (``Client.receive_data``, ``Client.link_lost``, and for
per-request streams ``Client.response_ended`` / ``Client.response_failed``).
A link whose ``confirms_transmission`` is true also calls
``Client.transmitted(out)`` once ``out`` is really on the wire; the client's
trace records the message as sent only then (so a message the link refused,
or could not send, is never recorded as sent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, Unpack

import trio

import mrtr_core as m

from .inputs import InputHandler
from .tracing import Tracer

if TYPE_CHECKING:
    from .client import Client

__all__ = ["ClientOptions", "Link", "Outbound", "open_client"]


@dataclass(slots=True)
class Outbound:
    """One message the client hands to its link.

    ``kind``: ``"leg"`` (a call's request), ``"plain"`` (a plain request),
    ``"handshake"``, ``"notification"`` or ``"response"`` (to a 2025 server's
    request).  ``message`` is the decoded message when the link asked for it
    (``Link.needs_messages``) or a tracer is set.  ``traced``: the trace has
    recorded it as sent.
    """

    data: bytes
    kind: Literal["leg", "plain", "handshake", "notification", "response"]
    method: str | None = None
    request_id: m.RequestId | None = None
    call: int | None = None
    round: int | None = None
    message: dict[str, Any] | None = None
    traced: bool = False


class Link(Protocol):
    """What moves a client connection's bytes.  A link never raises from ``transmit``:
    it reports failures through the client's callbacks."""

    #: ``"lines"`` for a byte stream, ``"messages"`` when every message is framed for us.
    framing: Literal["lines", "messages"]
    #: True when ``transmit`` needs ``Outbound.message`` (HTTP builds headers from it).
    needs_messages: bool
    #: True when tool calls need the tool list first (HTTP mirrors ``x-mcp-header``).
    wants_tool_list: bool
    #: True when the link calls ``Client.transmitted(out)`` once ``out`` is on the wire
    #: (HTTP: the POST was written); false when ``transmit`` is the transmission (stdio).
    confirms_transmission: bool

    async def start(self, client: Client, nursery: trio.Nursery) -> None:
        """Connect or spawn; raise ``TransportError`` when that fails."""

    def transmit(self, out: Outbound) -> None:
        """Put one message on the wire without blocking."""

    def close_stream(self, request_id: m.RequestId) -> None:
        """Stop reading the answer to ``request_id`` (HTTP: close its stream)."""

    def tools_listed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools to keep from a ``tools/list`` (HTTP drops invalid ``x-mcp-header``)."""
        ...

    async def aclose(self) -> None:
        """Shut the link down (bounded in time)."""


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception in ``group`` (however nested), or None if there are several."""
    found: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            found.append(exc)

    walk(group)
    return found[0] if len(found) == 1 else None


class ClientOptions(TypedDict, total=False):
    """The :class:`Client` options, as keywords of :func:`open_client` and of every
    link's opener (``open_stdio_client``, ``open_http_client``); unset ones take
    ``Client``'s defaults."""

    answer: InputHandler | None
    capabilities: Mapping[str, Any] | None
    era: Literal["auto", "modern", "legacy"]
    info: Mapping[str, Any] | None
    tracer: Tracer | None
    handshake_timeout: float
    log_level: str | None
    on_notification: Callable[[m.Notification], None] | None
    max_message_size: int
    max_calls: int
    max_outgoing: int


@asynccontextmanager
async def open_client(link: Link, **client_options: Unpack[ClientOptions]) -> AsyncIterator[Client]:
    """A :class:`Client` over ``link``, its session open (the era settled) on entry,
    the link shut down on exit.  Options as for :class:`Client`."""
    try:
        async with trio.open_nursery() as nursery:
            from .client import Client

            client = Client(link, nursery, **client_options)
            try:
                await link.start(client, nursery)
                await client._open()
                yield client
            finally:
                await client.aclose()
    except BaseExceptionGroup as group:
        # Link tasks never raise, so a group carries the caller's own exception: unwrap it.
        single = _single(group)
        if single is None:
            raise
        raise single from single.__cause__  # (keeps its cause, hides the group)
