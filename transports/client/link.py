"""What a client hands its link (:class:`Outbound`), what a link must do (:class:`Link`),
what a link may call back (:class:`LinkClient`), and the client's options
(:class:`ClientOptions`).

A link moves one client connection's bytes: ``StdioLink`` (a child process's
pipes) and ``HttpLink`` (one POST per message).  The client calls ``transmit``
for every message, in the order its connection produced them; the link calls
back into the client through :class:`LinkClient` (``receive_data``,
``link_lost``, and for per-request streams ``response_ended`` /
``response_failed``).  A link whose ``confirms_transmission`` is true also calls
``transmitted(out)`` once ``out`` is really on the wire; the client's
trace records the message as sent only then (so a message the link refused,
or could not send, is never recorded as sent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

from anyio.abc import TaskGroup

import mrtr_core as m

from .cache import ResponseCacheStore
from .era import Verdict
from .errors import TransportError
from .inputs import InputHandler
from .tracing import Tracer

__all__ = ["ClientOptions", "Link", "LinkClient", "Outbound", "OutboundKind"]


#: What an outbound message is, for the link and the trace.
OutboundKind = Literal["leg", "plain", "handshake", "notification", "response"]


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
    kind: OutboundKind
    method: str | None = None
    request_id: m.RequestId | None = None
    call: int | None = None
    round: int | None = None
    message: dict[str, Any] | None = None
    traced: bool = False


class LinkClient(Protocol):
    """What a link may call on the client it carries (the ``Client`` is one)."""

    @property
    def protocol_version(self) -> str | None:
        """The version in use (HTTP sends it as a header)."""

    @property
    def era(self) -> str | None:
        """``"modern"``, ``"legacy"``, or ``None`` while the probe runs."""

    def receive_data(self, data: bytes | bytearray) -> None:
        """Bytes from the peer (with ``framing="messages"``: exactly one message)."""

    def transmitted(self, out: Outbound) -> None:
        """``out`` is on the wire (links whose ``confirms_transmission`` is true)."""

    def link_lost(self, error: TransportError) -> None:
        """The link is gone: everything in flight fails with ``error``."""

    def is_waiting_for(self, request_id: m.RequestId) -> bool:
        """Whether the answer to ``request_id`` is still wanted."""
        ...

    def response_ended(self, out: Outbound) -> None:
        """Per-request streams: the response to ``out`` was read to its end."""

    def response_failed(self, out: Outbound, error: TransportError, *, broken: bool) -> None:
        """Per-request streams: no answer to ``out`` will come."""


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
    #: How a cancelled leg is withdrawn: ``"notify"`` sends ``notifications/cancelled``
    #: (stdio); ``"close_stream"`` sends nothing, the link closes the leg's response
    #: stream instead (HTTP).  The client passes it to its connection as is.
    cancellation: Literal["notify", "close_stream"]

    async def start(self, client: LinkClient, task_group: TaskGroup) -> None:
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


class ClientOptions(TypedDict, total=False):
    """The :class:`Client` options, as keywords of :func:`open_client` and of every
    link's opener (``open_stdio_client``, ``open_http_client``); unset ones take
    ``Client``'s defaults."""

    answer: InputHandler | None
    capabilities: Mapping[str, Any] | None
    era: Literal["auto", "modern", "legacy"]
    prior: Verdict | None
    info: Mapping[str, Any] | None
    tracer: Tracer | None
    handshake_timeout: float
    log_level: str | None
    on_notification: Callable[[m.Notification], None] | None
    max_message_size: int
    max_calls: int
    max_outgoing: int
    cache: ResponseCacheStore | None
    principal: str | None
