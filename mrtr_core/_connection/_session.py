"""The session state machine: protocol era and the 2025-era handshake, one table per role.

2026-07-28 requests need no session: each carries its own version and
capabilities in ``_meta``.  What a connection does have is (for a client) the
question which era the peer speaks, settled by probing ``server/discover``, and
(for either side) the 2025-era ``initialize`` / ``notifications/initialized``
handshake.  Both live here as transition tables.

Inputs are either *local* (the app sends something) or *remote* (anything
else: the peer sent something, a handshake timer fired, the stream ended, the
client was built for one era).  A local input whose pair is missing from the
table is API misuse: :class:`~mrtr_core.LocalProtocolError`, and the session
enters ``ERROR``.  A remote input whose pair is missing is refused (a server
answers the peer with an error, see ``docs/connection.md``) and the session
stays as it is, so one bad message never kills a connection.  Every state
change goes through these tables; nothing assigns ``Session.state`` directly.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from .._errors import LocalProtocolError


class SessionState(enum.Enum):
    __hash__ = object.__hash__

    NEW = "new"  # nothing exchanged yet
    DISCOVERING = "discovering"  # client: server/discover probe in flight
    MODERN = "modern"  # client: the peer speaks 2026-07-28; no handshake
    INITIALIZING = "initializing"  # initialize sent (client) / received, not answered (server)
    INITIALIZED = "initialized"  # initialize answered; notifications/initialized not yet through
    READY = "ready"  # 2025-era session established
    FAILED = "failed"  # client: no era could be agreed; nothing more can be sent
    CLOSED = "closed"  # the byte stream ended
    ERROR = "error"  # the API was misused


class SessionInput(enum.Enum):
    __hash__ = object.__hash__

    # client, local
    SEND_DISCOVER = "send_discover"
    SEND_INITIALIZE = "send_initialize"
    SEND_INITIALIZED = "send_initialized"
    # client, remote
    START_MODERN = "start_modern"  # built with era="modern": open without a probe
    RECV_DISCOVER_RESULT = "recv_discover_result"
    RECV_VERSION_ERROR = "recv_version_error"  # -32022 naming a version we can retry with
    RECV_MODERN_ERROR = "recv_modern_error"  # any other recognised 2026 error: no fallback
    RECV_LEGACY_SIGNAL = "recv_legacy_signal"  # an unrecognised error, or the probe timed out
    # The same signal at a client built without 2025 versions: nothing to fall back to.
    RECV_LEGACY_SIGNAL_NO_FALLBACK = "recv_legacy_signal_no_fallback"
    RECV_INITIALIZE_RESULT = "recv_initialize_result"
    RECV_INITIALIZE_ERROR = "recv_initialize_error"
    RECV_SERVER_REQUEST = "recv_server_request"  # a server-to-client request
    # server, remote
    RECV_INITIALIZE = "recv_initialize"
    RECV_INITIALIZED = "recv_initialized"
    RECV_LEGACY_REQUEST = "recv_legacy_request"  # a request without 2026 _meta
    # server, local
    SEND_INITIALIZE_RESULT = "send_initialize_result"
    SEND_INITIALIZE_ERROR = "send_initialize_error"
    SEND_SERVER_REQUEST = "send_server_request"
    # both
    SEND_REQUEST = "send_request"  # client: an app request; server: see SEND_SERVER_REQUEST
    CLOSE = "close"  # end of the byte stream


S = SessionState
I = SessionInput  # noqa: E741

LOCAL_INPUTS = frozenset(
    {
        I.SEND_DISCOVER,
        I.SEND_INITIALIZE,
        I.SEND_INITIALIZED,
        I.SEND_INITIALIZE_RESULT,
        I.SEND_INITIALIZE_ERROR,
        I.SEND_SERVER_REQUEST,
        I.SEND_REQUEST,
    }
)
REMOTE_INPUTS = frozenset(SessionInput) - LOCAL_INPUTS
TERMINAL_STATES = frozenset({S.FAILED, S.CLOSED, S.ERROR})

_CLOSE_ANYWHERE = {(state, I.CLOSE): state if state is S.ERROR else S.CLOSED for state in S}

CLIENT_TRANSITIONS: Mapping[tuple[SessionState, SessionInput], SessionState] = {
    (S.NEW, I.SEND_DISCOVER): S.DISCOVERING,
    (S.NEW, I.SEND_INITIALIZE): S.INITIALIZING,
    (S.NEW, I.START_MODERN): S.MODERN,
    (S.DISCOVERING, I.RECV_DISCOVER_RESULT): S.MODERN,
    # -32022: the probe goes again with a version the server named (the connection
    # allows this once).
    (S.DISCOVERING, I.RECV_VERSION_ERROR): S.DISCOVERING,
    (S.DISCOVERING, I.SEND_DISCOVER): S.DISCOVERING,
    (S.DISCOVERING, I.RECV_MODERN_ERROR): S.FAILED,
    (S.DISCOVERING, I.RECV_LEGACY_SIGNAL): S.NEW,
    (S.DISCOVERING, I.RECV_LEGACY_SIGNAL_NO_FALLBACK): S.FAILED,
    (S.MODERN, I.SEND_DISCOVER): S.MODERN,
    (S.MODERN, I.RECV_DISCOVER_RESULT): S.MODERN,
    (S.MODERN, I.SEND_REQUEST): S.MODERN,
    (S.INITIALIZING, I.RECV_INITIALIZE_RESULT): S.INITIALIZED,
    (S.INITIALIZING, I.RECV_INITIALIZE_ERROR): S.FAILED,
    (S.INITIALIZING, I.RECV_LEGACY_SIGNAL): S.FAILED,  # initialize itself timed out
    (S.INITIALIZED, I.SEND_INITIALIZED): S.READY,
    # 2025-era servers may ping before the handshake completes.
    (S.INITIALIZING, I.RECV_SERVER_REQUEST): S.INITIALIZING,
    (S.INITIALIZED, I.RECV_SERVER_REQUEST): S.INITIALIZED,
    (S.READY, I.RECV_SERVER_REQUEST): S.READY,
    (S.READY, I.SEND_REQUEST): S.READY,
    **_CLOSE_ANYWHERE,
}

SERVER_TRANSITIONS: Mapping[tuple[SessionState, SessionInput], SessionState] = {
    (S.NEW, I.RECV_INITIALIZE): S.INITIALIZING,
    (S.INITIALIZING, I.SEND_INITIALIZE_RESULT): S.INITIALIZED,
    # A refused initialize (bad params): the client may try again.
    (S.INITIALIZING, I.SEND_INITIALIZE_ERROR): S.NEW,
    (S.INITIALIZED, I.RECV_INITIALIZED): S.READY,
    (S.READY, I.RECV_INITIALIZED): S.READY,  # a duplicate is harmless
    # Clients commonly send requests right after the initialize result, before
    # notifications/initialized has reached us.
    (S.INITIALIZED, I.RECV_LEGACY_REQUEST): S.INITIALIZED,
    (S.READY, I.RECV_LEGACY_REQUEST): S.READY,
    (S.READY, I.SEND_SERVER_REQUEST): S.READY,
    **_CLOSE_ANYWHERE,
}


class Session:
    """One role's session state, advanced only through its table."""

    __slots__ = ("state", "table")

    def __init__(
        self,
        table: Mapping[tuple[SessionState, SessionInput], SessionState],
        state: SessionState = SessionState.NEW,
    ) -> None:
        self.table = table
        self.state = state

    def allows(self, given: SessionInput) -> bool:
        return (self.state, given) in self.table

    def local(self, given: SessionInput) -> None:
        """Apply a local input; a missing pair is misuse and ends the session in ERROR."""
        target = self.table.get((self.state, given))
        if target is None:
            previous = self.state
            if previous not in TERMINAL_STATES:
                self.state = SessionState.ERROR
            raise LocalProtocolError(f"cannot {given.value} in session state {previous.value}")
        self.state = target

    def remote(self, given: SessionInput) -> bool:
        """Apply a remote input if legal; return whether it was (the state is kept if not)."""
        target = self.table.get((self.state, given))
        if target is None:
            return False
        self.state = target
        return True
