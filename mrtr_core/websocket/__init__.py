"""MCP over WebSocket (the SEP-1288 draft), for authors of a WebSocket binding: the
subprotocol, message assembly and its bound, and the close codes both ends use.
See ``docs/transports.md``, section 5.
"""

from ._binding import (
    CLOSE_CODES,
    SUBPROTOCOL,
    Fault,
    MessageAssembler,
    WebSocketViolation,
    check_subprotocol,
    choose_subprotocol,
    close_reason,
)

__all__ = [
    "CLOSE_CODES",
    "SUBPROTOCOL",
    "Fault",
    "MessageAssembler",
    "WebSocketViolation",
    "check_subprotocol",
    "choose_subprotocol",
    "close_reason",
]
