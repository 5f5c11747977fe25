"""mrtr_core: a sans-IO core for MCP multi round-trip requests (SEP-2322, 2026-07-28).

No I/O, no clock, no threads: feed it bytes, results and the time, and it tells
you what to send and whom to ask.

The top level is what a connection user needs: the :class:`Connection`, its
roles, session states and events, the messages sent and received, the errors
and their codes, the protocol versions it negotiates, and the one "nothing to
hand out" sentinel.  Every other audience has one public submodule
(``docs/core.md`` has the table):

* :mod:`mrtr_core.engine`: client SDK authors driving one flow's rounds;
* :mod:`mrtr_core.server`: server authors asking, reading answers, sealing state;
* :mod:`mrtr_core.wire`: the payload model, ``_meta`` keys, input kinds, JSON codec, line framing;
* :mod:`mrtr_core.http`: authors of a Streamable HTTP binding (headers, POST rules,
  SSE, 2025-era sessions and replay);
* :mod:`mrtr_core.websocket`: authors of a WebSocket binding;
* :mod:`mrtr_core.caching`: clients keeping a response cache;
* :mod:`mrtr_core.tasks`: server and client authors of the tasks extension (SEP-2663);
* :mod:`mrtr_core.auth`: authorization, what a resource server and an OAuth client share.

Modules whose names start with ``_`` are not part of the public API (our own
transports import a few of them).

``pip install mrtr`` installs this core alone; ``pip install 'mrtr[transports]'`` adds
``mrtr_transports``, the adapters and the ``mrtr`` command.
"""

# (named, for type checkers: our transports read a few of its bounds as m._connection._options.X)
from . import _connection as _connection
from . import auth as auth
from . import caching as caching
from . import engine as engine
from . import http as http
from . import server as server
from . import tasks as tasks
from . import websocket as websocket
from . import wire as wire
from ._connection._connection import Connection
from ._connection._events import (
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
from ._connection._options import CLIENT, SERVER, Role
from ._connection._session import SessionState
from ._connection._verdict import Verdict
from ._errors import (
    AppResultRefused,
    ErrorCode,
    LocalProtocolError,
    MrtrError,
    PeerError,
    RemoteProtocolError,
)
from ._meta import ALL_VERSIONS, LEGACY_VERSIONS, MODERN_VERSIONS, Era
from ._wait import NEED_DATA, Wait
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
    # the connection, its roles and session states
    "CLIENT",
    "SERVER",
    "Connection",
    "Role",
    "SessionState",
    "Verdict",
    # the versions it negotiates
    "ALL_VERSIONS",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "Era",
    # its events
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
    # messages travel as themselves, in both directions
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
    # errors, and the codes they carry
    "AppResultRefused",
    "LocalProtocolError",
    "MrtrError",
    "PeerError",
    "RemoteProtocolError",
    "ErrorCode",
]
