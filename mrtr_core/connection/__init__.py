"""The connection: a whole MCP conversation over bytes, for a client or a server.

``Connection``, its events and roles are also at the top level of
``mrtr_core``; here besides them are its bounds and the session tables.  See
``docs/connection.md``.
"""

from ..wire._depth import DEFAULT_MAX_DEPTH
from ._connection import (
    CLIENT,
    DEFAULT_MAX_BUFFER_SIZE,
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_FINISHED_IDS,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_MESSAGE_SIZE,
    SERVER,
    Connection,
    Role,
)
from ._events import (
    AutoReply,
    CallEvent,
    ConnectionClosed,
    ConnectionEvent,
    HandshakeStep,
    InvalidMessage,
    LogMessage,
    Progress,
    RequestCancelled,
    Sendable,
    SessionFailed,
    SessionOpened,
)
from ._session import CLIENT_TRANSITIONS, SERVER_TRANSITIONS, SessionInput, SessionState
from ._verdict import Verdict

__all__ = [
    "Sendable",
    "CLIENT",
    "DEFAULT_MAX_BUFFER_SIZE",
    "DEFAULT_MAX_CALLS",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FINISHED_IDS",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "SERVER",
    "Connection",
    "Role",
    "AutoReply",
    "CallEvent",
    "ConnectionClosed",
    "ConnectionEvent",
    "HandshakeStep",
    "InvalidMessage",
    "LogMessage",
    "Progress",
    "RequestCancelled",
    "SessionFailed",
    "SessionOpened",
    "CLIENT_TRANSITIONS",
    "SERVER_TRANSITIONS",
    "SessionInput",
    "SessionState",
    "Verdict",
]
