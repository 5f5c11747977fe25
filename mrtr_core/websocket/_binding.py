"""MCP over WebSocket: the rules both ends share (the SEP-1288 draft), sans-IO.

The model.  A WebSocket carries one long conversation, as stdio does: the
client opens it with an HTTP upgrade that offers the subprotocol ``mcp``
(:data:`SUBPROTOCOL`); the server refuses an upgrade that does not offer it,
and selects it when it accepts.  Then every JSON-RPC message travels alone in
one UTF-8 *text* message (which the sender may split into frames); a binary
message is not MCP.  Everything else (requests, notifications, cancellation
with ``notifications/cancelled``) is as on stdio.

This module holds what does not depend on any socket library:

* :class:`MessageAssembler` joins a message's text fragments into the bytes a
  ``Connection(framing="messages")`` reads, and bounds its size while it
  grows, so an oversized message is refused before it is held;
* :class:`Fault` names every way a WebSocket conversation is ended by us, and
  :data:`CLOSE_CODES` maps each to the close code (RFC 6455, section 7.4) we
  send, once for both ends;
* :func:`choose_subprotocol` (server) and :func:`check_subprotocol` (client)
  apply the subprotocol rule; :func:`describe_close` words a close for people,
  :func:`close_reason` cuts a reason to fit a close frame.

A peer that breaks these rules gets a :class:`WebSocketViolation` (a
``RemoteProtocolError``) that names the close code to send.  Broken frames
(bad masking, bad opcodes, invalid UTF-8 in a text message) are the
WebSocket library's business: it closes with 1002 or 1007 itself.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from types import MappingProxyType

from .._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError

__all__ = [
    "CLOSE_CODES",
    "DEFAULT_MAX_WEBSOCKET_MESSAGE",
    "SUBPROTOCOL",
    "CloseCode",
    "Fault",
    "MessageAssembler",
    "MAX_CLOSE_REASON",
    "WebSocketViolation",
    "check_subprotocol",
    "close_reason",
    "choose_subprotocol",
    "describe_close",
]

#: The subprotocol a client offers (``Sec-WebSocket-Protocol: mcp``) and a server selects.
SUBPROTOCOL = "mcp"
#: Bytes of one message (UTF-8) by default: as much as one HTTP POST body may carry.
DEFAULT_MAX_WEBSOCKET_MESSAGE = 4 * 1024 * 1024


class CloseCode(enum.IntEnum):
    """The close codes of RFC 6455 (section 7.4.1) this transport sends or explains."""

    NORMAL = 1000
    GOING_AWAY = 1001
    PROTOCOL_ERROR = 1002
    UNSUPPORTED_DATA = 1003
    NO_STATUS = 1005  # never sent: the peer's close frame had no code
    ABNORMAL = 1006  # never sent: the connection ended without a close frame
    INVALID_PAYLOAD = 1007
    POLICY_VIOLATION = 1008
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011


class Fault(enum.Enum):
    """Why we end a WebSocket conversation (:data:`CLOSE_CODES` says with which code)."""

    #: The conversation is over and nothing went wrong (a client's ordinary close).
    DONE = "done"
    #: The server shuts down.
    SHUTDOWN = "shutdown"
    #: A binary message: MCP messages are JSON text.
    BINARY_MESSAGE = "binary message"
    #: A message past the size bound.
    MESSAGE_TOO_BIG = "message too big"
    #: A text message that is not UTF-8.
    INVALID_UTF8 = "invalid UTF-8"
    #: Frames that break the WebSocket protocol itself.
    BROKEN_FRAMING = "broken framing"
    #: Something the endpoint's policy forbids (an ``Origin`` that changed its mind...).
    POLICY = "policy"
    #: No pong to our ping in time: the peer (or the path to it) is gone.
    KEEPALIVE_TIMEOUT = "keepalive timeout"


#: The close code of each :class:`Fault`: the one mapping both ends use.
CLOSE_CODES = MappingProxyType(
    {
        Fault.DONE: CloseCode.NORMAL,
        Fault.SHUTDOWN: CloseCode.GOING_AWAY,
        Fault.BINARY_MESSAGE: CloseCode.UNSUPPORTED_DATA,
        Fault.MESSAGE_TOO_BIG: CloseCode.MESSAGE_TOO_BIG,
        Fault.INVALID_UTF8: CloseCode.INVALID_PAYLOAD,
        Fault.BROKEN_FRAMING: CloseCode.PROTOCOL_ERROR,
        Fault.POLICY: CloseCode.POLICY_VIOLATION,
        # As other WebSocket stacks do: the close frame rarely arrives, the log reads well.
        Fault.KEEPALIVE_TIMEOUT: CloseCode.INTERNAL_ERROR,
    }
)

_MEANINGS: dict[int, str] = {
    CloseCode.NORMAL: "normal closure",
    CloseCode.GOING_AWAY: "going away",
    CloseCode.PROTOCOL_ERROR: "protocol error",
    CloseCode.UNSUPPORTED_DATA: "unsupported data",
    CloseCode.NO_STATUS: "no status code",
    CloseCode.ABNORMAL: "closed without a close frame",
    CloseCode.INVALID_PAYLOAD: "invalid payload",
    CloseCode.POLICY_VIOLATION: "policy violation",
    CloseCode.MESSAGE_TOO_BIG: "message too big",
    CloseCode.INTERNAL_ERROR: "internal error",
}


class WebSocketViolation(RemoteProtocolError):
    """The peer broke a rule of MCP over WebSocket; close with ``close_code``.

    ``fault`` says which rule; ``close_code`` is ``CLOSE_CODES[fault]``.
    """

    code = INVALID_REQUEST

    def __init__(self, message: str, fault: Fault) -> None:
        super().__init__(message)
        self.fault = fault
        self.close_code = CLOSE_CODES[fault]


def choose_subprotocol(offered: Iterable[str]) -> str | None:
    """The subprotocol a server selects from the client's offer: ``"mcp"``, or ``None``
    when it is not offered (then the upgrade must be refused).

    Names are compared exactly (RFC 6455 subprotocol tokens are case-sensitive).
    Other entries (the draft's ``mcp.auth.<token>``, say) are never selected: a
    server must not echo what may be a secret.
    """
    return SUBPROTOCOL if any(name.strip() == SUBPROTOCOL for name in offered) else None


def check_subprotocol(selected: str | None) -> None:
    """A client's check of the server's answer: it must have selected ``"mcp"``.

    Raises :class:`RemoteProtocolError` otherwise (a server that ignores the
    subprotocol may speak anything on the socket).
    """
    if selected != SUBPROTOCOL:
        shown = "none" if selected is None else repr(selected)
        raise RemoteProtocolError(
            f"the server accepted the WebSocket with subprotocol {shown}, not {SUBPROTOCOL!r}",
            code=INVALID_REQUEST,
        )


def describe_close(code: int | None, reason: str | None = None) -> str:
    """A close as a person reads it: ``"1009 (message too big): <reason>"``."""
    if code is None:
        return "closed without a close frame"
    meaning = _MEANINGS.get(code)  # (an IntEnum key matches its int)
    if meaning is None:
        meaning = "application-defined" if 3000 <= code <= 4999 else "unknown code"
    text = f"{code} ({meaning})"
    return f"{text}: {reason}" if reason else text


class MessageAssembler:
    """Text fragments in, whole messages (UTF-8 bytes) out, bounded by ``max_message_size``.

    Feed every text fragment in order with :meth:`receive_text`; it returns the
    message's bytes once ``message_finished``, else ``None``.  A message that
    passes ``max_message_size`` raises :class:`WebSocketViolation`
    (``MESSAGE_TOO_BIG``) as soon as it does: at most one fragment past the
    bound is ever held.  :meth:`receive_binary` always raises (``BINARY_MESSAGE``).
    After a violation the assembler refuses everything (the conversation is over).
    """

    __slots__ = ("_failed", "_parts", "_size", "max_message_size")

    def __init__(self, *, max_message_size: int = DEFAULT_MAX_WEBSOCKET_MESSAGE) -> None:
        if isinstance(max_message_size, bool) or not isinstance(max_message_size, int):
            raise LocalProtocolError(
                f"max_message_size must be an int, got {type(max_message_size).__name__}"
            )
        if max_message_size < 1:
            raise LocalProtocolError("max_message_size must be at least 1")
        self.max_message_size = max_message_size
        self._parts: list[bytes] = []
        self._size = 0
        self._failed: WebSocketViolation | None = None

    @property
    def buffered(self) -> int:
        """Bytes of the message being assembled."""
        return self._size

    def receive_text(self, data: str, *, message_finished: bool) -> bytes | None:
        """One text fragment; the whole message's bytes when it is finished."""
        self._check_open()
        # (A str from a UTF-8 decoder has no lone surrogates; one given by hand is kept
        # byte for byte, and the JSON decoder refuses it later with -32700.)
        chunk = data.encode("utf-8", "surrogatepass")
        self._size += len(chunk)
        if self._size > self.max_message_size:
            self._parts.clear()
            self._fail(
                f"a message of more than {self.max_message_size} bytes "
                f"(at least {self._size}): the bound is max_message_size",
                Fault.MESSAGE_TOO_BIG,
            )
        self._parts.append(chunk)
        if not message_finished:
            return None
        message = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return message

    def receive_binary(self) -> None:
        """A binary fragment: never an MCP message."""
        self._check_open()
        self._parts.clear()
        self._size = 0
        self._fail(
            "a binary message: MCP messages are JSON text, one per text message",
            Fault.BINARY_MESSAGE,
        )

    def _check_open(self) -> None:
        if self._failed is not None:
            raise LocalProtocolError(
                f"the conversation ended with {self._failed.message!r}: close the WebSocket"
            )

    def _fail(self, message: str, fault: Fault) -> None:
        self._failed = WebSocketViolation(message, fault)
        raise self._failed


#: Bytes of a close frame's reason (RFC 6455: the frame's payload is at most 125 bytes).
MAX_CLOSE_REASON = 123


def close_reason(text: str) -> str:
    """``text`` cut to fit a close frame (at most 123 bytes of UTF-8, whole characters)."""
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_CLOSE_REASON:
        return text
    return data[: MAX_CLOSE_REASON - 3].decode("utf-8", "ignore") + "..."
