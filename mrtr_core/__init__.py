"""mrtr_core: a sans-IO core for MCP multi round-trip requests (SEP-2322, 2026-07-28).

No I/O, no clock, no threads: feed it bytes, results and the time, and it tells
you what to send and whom to ask.

The top level is what a connection user needs: the :class:`Connection`, its
roles and events, the messages sent and received, the errors, the one
"nothing to hand out" sentinel, and the :class:`RoundEngine` with its events.
Other audiences have public submodules:

* :mod:`mrtr_core.server`: asking, reading answers, sealed state, handler styles, the 2025 shim;
* :mod:`mrtr_core.wire`: the payload model, conversion, JSON codec, framing, SSE;
* :mod:`mrtr_core.protocol`: versions, ``_meta`` keys, error codes, input kinds, HTTP headers;
* :mod:`mrtr_core.engine`: the round engine's table, pacing, retry params and errors;
* :mod:`mrtr_core.connection`: the connection's bounds and session tables.

``pip install mrtr`` installs this core alone; ``pip install 'mrtr[transports]'`` adds
``mrtr_transports``, the trio adapters and the ``mrtr`` command.
"""

from . import connection, engine, protocol, server, wire
from ._errors import (
    AppResultRefused,
    LocalProtocolError,
    MrtrError,
    PeerError,
    RemoteProtocolError,
)
from ._wait import NEED_DATA, Wait
from .connection._connection import CLIENT, SERVER, Connection, Role
from .connection._events import (
    AutoReply,
    CallEvent,
    ConnectionClosed,
    ConnectionEvent,
    HandshakeStep,
    InvalidMessage,
    LogMessage,
    Progress,
    RequestCancelled,
    SessionFailed,
    SessionOpened,
)
from .engine._engine import RoundEngine
from .engine._events import (
    CancelInputs,
    Cancelled,
    CancelLeg,
    DispatchInput,
    Done,
    EngineEvent,
    Failed,
    RoundStarted,
    SendRequest,
    SendRetry,
    TimedOut,
)
from .wire._model import (
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    ResultResponse,
    error_response,
)

#: The version of the ``mrtr`` distribution (its one source: pyproject.toml reads it here).
__version__ = "0.1.0"

__all__ = [
    # the connection
    "CLIENT",
    "SERVER",
    "Connection",
    "Role",
    # its events (messages travel as themselves, in both directions)
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
    "ErrorObject",
    "ErrorResponse",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "ResultResponse",
    "error_response",
    # nothing to hand out yet
    "NEED_DATA",
    "Wait",
    # errors
    "AppResultRefused",
    "LocalProtocolError",
    "MrtrError",
    "PeerError",
    "RemoteProtocolError",
    # the round engine and its events
    "RoundEngine",
    "CancelInputs",
    "CancelLeg",
    "Cancelled",
    "DispatchInput",
    "Done",
    "EngineEvent",
    "Failed",
    "RoundStarted",
    "SendRequest",
    "SendRetry",
    "TimedOut",
    # the public submodules
    "connection",
    "engine",
    "protocol",
    "server",
    "wire",
]
