"""The rules of 2025-era Streamable HTTP sessions a client follows, sans-IO.

A 2025-11-25 server may answer ``initialize`` with an ``Mcp-Session-Id``
header; the client then sends it, and ``MCP-Protocol-Version`` (the negotiated
version), on every later request of the session (``initialize`` itself carries
neither: its version is in the body).  The id may only hold visible ASCII
(0x21-0x7E); we also bound its length, so a peer cannot make us echo a huge
header on every request.

A server's SSE stream may carry event ids; when it breaks, the client may
resume it with a GET carrying ``Last-Event-ID``, waiting the ``retry`` the
server last set.  :class:`StreamResumption` keeps that bookkeeping for one
stream: the last id seen (only ids that are themselves a valid header value
are kept), the delay, and a bound on the attempts in a row that brought
nothing new.
"""

from __future__ import annotations

import attrs

from .._errors import LocalProtocolError, RemoteProtocolError
from ._headers import Header
from ._sessions import valid_session_id

#: The longest session id (and event id) we accept from a server: looser than the
#: bounds on our own ids (``_sessions``), since other servers choose their own.
MAX_PEER_SESSION_ID_LENGTH = 1024
MAX_PEER_EVENT_ID_LENGTH = 1024
#: Resumption attempts in a row that bring no new event before the stream is given up.
DEFAULT_RESUME_ATTEMPTS = 3
#: The reconnection delay without a ``retry`` field, and the most a server may ask for.
DEFAULT_RETRY_MS = 1000
MAX_RETRY_MS = 30_000


def check_session_id(raw: bytes | str) -> str:
    """The session id a server sent, or ``RemoteProtocolError`` if it is not 1 to
    ``MAX_PEER_SESSION_ID_LENGTH`` visible ASCII characters."""
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    if not valid_session_id(text, MAX_PEER_SESSION_ID_LENGTH):
        shown = text[:40] + ("..." if len(text) > 40 else "")
        raise RemoteProtocolError(
            f"the server sent an invalid {Header.SESSION_ID} ({len(text)} characters, "
            f"must be 1 to {MAX_PEER_SESSION_ID_LENGTH} visible ASCII): {shown!r}"
        )
    return text


def session_headers(
    session_id: str | None, protocol_version: str | None, *, method: str | None
) -> list[tuple[str, str]]:
    """The session headers of one request of a 2025 session (none on ``initialize``)."""
    if method == "initialize":
        return []
    headers: list[tuple[str, str]] = []
    if session_id is not None:
        headers.append((Header.SESSION_ID, session_id))
    if protocol_version is not None:
        headers.append(("MCP-Protocol-Version", protocol_version))
    return headers


@attrs.define
class StreamResumption:
    """One SSE stream's resumption state (see the module docstring).

    Feed it every event's ``id`` and ``retry`` (:meth:`saw`); when the stream
    breaks, :meth:`next_delay` says how long to wait before a GET with
    ``Last-Event-ID`` (:attr:`last_event_id`), or ``None``: give up.
    """

    max_attempts: int = DEFAULT_RESUME_ATTEMPTS
    last_event_id: str | None = None
    retry_ms: int = DEFAULT_RETRY_MS
    attempts: int = 0

    def __attrs_post_init__(self) -> None:
        if self.max_attempts < 0:
            raise LocalProtocolError("max_attempts must be 0 or more")

    def saw(self, event_id: str | None, retry_ms: int | None) -> None:
        """An event arrived: remember its id (when usable) and retry; the stream
        moved on, so the attempts in a row start again."""
        if retry_ms is not None:
            self.retry_ms = min(retry_ms, MAX_RETRY_MS)
        if (
            event_id is not None
            and event_id != self.last_event_id
            and valid_session_id(event_id, MAX_PEER_EVENT_ID_LENGTH)
        ):
            self.last_event_id = event_id
            self.attempts = 0

    def next_delay(self) -> float | None:
        """Seconds to wait before resuming (an attempt is counted), or ``None`` when
        the stream cannot be resumed: no event id yet, or the attempts are spent."""
        if self.last_event_id is None or self.attempts >= self.max_attempts:
            return None
        self.attempts += 1
        return self.retry_ms / 1000
