"""2025-era Streamable HTTP sessions: which POST is 2025-era, its header rules, and
the table of live sessions (sans-IO; the clock is passed in).

The model.  A 2025-era client (protocol 2025-11-25 and earlier) opens a session
with ``initialize``; the server names it in the ``Mcp-Session-Id`` response
header, and every later request, notification, response, ``GET`` and
``DELETE`` of that client carries the header.  A 2026-07-28 request carries
its version in ``params._meta`` instead and needs no session, so one endpoint
tells the two apart by the body first (:func:`is_legacy_message`).

The header rules (:func:`read_legacy_headers`), each refusal a
:class:`SessionRefused` with the HTTP status the spec names:

* ``Mcp-Session-Id``: required on everything but ``initialize`` (400 without);
  a value that is not 1 to ``MAX_SESSION_ID_LENGTH`` visible ASCII characters
  (0x21-0x7E) is 400; a session this server does not hold is 404 (the
  table's ``lookup``), after which the client starts a new one.
* ``MCP-Protocol-Version``: absent means 2025-03-26 (as the spec says, for
  clients older than the header); a version this server does not serve is 400.
* ``Last-Event-ID``: at most ``MAX_EVENT_ID_LENGTH`` characters.
* Any of them twice: 400.

The table (:class:`SessionTable`) bounds how many sessions live at once and
ends the idle ones: a session with work running (a request, a stream) never
expires; one idle for ``idle_timeout`` seconds does.  When the table is full,
``admit`` first drops expired sessions, then the one idle the longest; only
when every session is busy is the newcomer refused (503).  Session ids come
from the caller (``secrets.token_urlsafe``: unguessable); the table checks
their shape.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container, Mapping
from typing import Any

import attrs

from .._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError
from .._meta import LEGACY_VERSIONS, META_PROTOCOL_VERSION
from ._headers import Header, ReceivedHeaders

__all__ = [
    "DEFAULT_LEGACY_VERSION",
    "MAX_EVENT_ID_LENGTH",
    "MAX_SESSION_ID_LENGTH",
    "LegacyHeaders",
    "SessionRefused",
    "SessionTable",
    "is_legacy_message",
    "read_legacy_headers",
    "valid_session_id",
]

#: What a request without ``MCP-Protocol-Version`` speaks (the spec's rule).
DEFAULT_LEGACY_VERSION = "2025-03-26"
MAX_SESSION_ID_LENGTH = 128
MAX_EVENT_ID_LENGTH = 64


class SessionRefused(RemoteProtocolError):
    """A 2025-era request the session rules refuse; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message, code=INVALID_REQUEST)
        self.status = status


def valid_session_id(value: str, max_length: int = MAX_SESSION_ID_LENGTH) -> bool:
    """1 to ``max_length`` visible ASCII characters (0x21-0x7E): the spec's shape of
    a session id, which is also the shape of an event id we echo in a header."""
    return 0 < len(value) <= max_length and all("\x21" <= char <= "\x7e" for char in value)


def is_legacy_message(received: ReceivedHeaders, message: Any) -> bool:
    """Whether a POSTed JSON-RPC message belongs to the 2025-era session model.

    A message whose ``params._meta`` names a protocol version is 2026-07-28
    whatever its headers say.  Otherwise it is 2025-era when it names a
    session, is an ``initialize``, or says a 2025 version in
    ``MCP-Protocol-Version``; anything else is left to the 2026-07-28 rules
    (which answer a request without ``_meta`` with -32602).
    """
    if not isinstance(message, Mapping):
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if isinstance(meta, Mapping) and META_PROTOCOL_VERSION in meta:
        return False
    if received.get(Header.SESSION_ID.lower()) or message.get("method") == "initialize":
        return True
    return any(v.strip() in LEGACY_VERSIONS for v in received.get("mcp-protocol-version", ()))


@attrs.frozen
class LegacyHeaders:
    """What a 2025-era request's headers say."""

    session_id: str | None
    protocol_version: str
    last_event_id: str | None


def _single(received: ReceivedHeaders, name: str) -> str | None:
    values = received.get(name.lower(), ())
    if len(values) > 1:
        raise SessionRefused(f"more than one {name} header: send one", 400)
    return values[0].strip() if values else None


def read_legacy_headers(
    received: ReceivedHeaders,
    *,
    initialize: bool = False,
    versions: tuple[str, ...] = LEGACY_VERSIONS,
) -> LegacyHeaders:
    """The session id, protocol version and ``Last-Event-ID`` of a 2025-era request.

    ``initialize``: the request opens a session (it needs no id, and its
    version is negotiated in the body).  Raises :class:`SessionRefused`.
    """
    session_id = _single(received, Header.SESSION_ID)
    if session_id is None and not initialize:
        raise SessionRefused(
            f"missing {Header.SESSION_ID} header: send the id the initialize response named",
            400,
        )
    if session_id is not None and not valid_session_id(session_id):
        raise SessionRefused(f"malformed {Header.SESSION_ID}: not a session id of this server", 400)
    version = _single(received, Header.PROTOCOL_VERSION)
    if version is None:
        version = DEFAULT_LEGACY_VERSION
    elif version not in versions and not initialize:
        raise SessionRefused(
            f"unsupported {Header.PROTOCOL_VERSION} {version[:40]!r}: this server serves "
            + ", ".join(versions),
            400,
        )
    last_event_id = _single(received, Header.LAST_EVENT_ID)
    if last_event_id is not None and len(last_event_id) > MAX_EVENT_ID_LENGTH:
        raise SessionRefused(f"{Header.LAST_EVENT_ID} is too long to be one of ours", 400)
    return LegacyHeaders(None if initialize else session_id, version, last_event_id)


@attrs.define
class _Entry:
    last_used: float
    busy: int = 0


class SessionTable:
    """Live session ids: at most ``max_sessions``, each ending after ``idle_timeout``
    seconds without work."""

    def __init__(self, max_sessions: int, idle_timeout: float) -> None:
        if max_sessions < 1 or not idle_timeout > 0:
            raise LocalProtocolError("max_sessions >= 1 and idle_timeout > 0 are needed")
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        #: Least recently used first.
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._entries

    def admit(self, now: float) -> list[str] | None:
        """Make room for one more session: the ids to end first (expired ones, or
        the one idle longest), or ``None`` when every session is busy."""
        ending = self.expired(now)
        if len(self._entries) - len(ending) < self.max_sessions:
            return ending
        idle = self.idle_longest()
        return None if idle is None else [idle]

    def idle_longest(self, among: Container[str] | None = None) -> str | None:
        """The session without work used the longest ago (one of ``among``, when
        given: a client's own), or ``None`` when each of them has work."""
        for session_id, entry in self._entries.items():
            if entry.busy == 0 and (among is None or session_id in among):
                return session_id
        return None

    def add(self, session_id: str, now: float) -> None:
        if not valid_session_id(session_id) or session_id in self._entries:
            raise LocalProtocolError("a new session needs a fresh, well-formed id")
        if len(self._entries) >= self.max_sessions:
            raise LocalProtocolError("the table is full: admit() first")
        self._entries[session_id] = _Entry(now)

    def lookup(self, session_id: str, now: float) -> None:
        """A request names ``session_id``: it is used now.  404 when unknown or expired."""
        entry = self._entries.get(session_id)
        if entry is None or (entry.busy == 0 and now - entry.last_used >= self.idle_timeout):
            raise SessionRefused(
                f"unknown or expired session {session_id[:16]!r}...: send initialize "
                "to start a new one",
                404,
            )
        entry.last_used = now
        self._entries.move_to_end(session_id)

    def touch(self, session_id: str, now: float) -> None:
        """The session was used now without work of its own (a GET stream of it ended):
        its idle time counts from now, and it is the least likely to be ended."""
        entry = self._entries.get(session_id)
        if entry is not None:
            entry.last_used = max(entry.last_used, now)
            self._entries.move_to_end(session_id)

    def begin(self, session_id: str) -> None:
        """Work for the session starts (a request, a stream): it cannot expire meanwhile."""
        if session_id in self._entries:
            self._entries[session_id].busy += 1

    def end(self, session_id: str, now: float) -> None:
        """That work ended: the idle time counts from now."""
        entry = self._entries.get(session_id)
        if entry is not None and entry.busy > 0:
            entry.busy -= 1
            entry.last_used = now

    def expired(self, now: float) -> list[str]:
        """Idle sessions past ``idle_timeout`` (still in the table: ``remove`` them)."""
        return [
            session_id
            for session_id, entry in self._entries.items()
            if entry.busy == 0 and now - entry.last_used >= self.idle_timeout
        ]

    def remove(self, session_id: str) -> None:
        self._entries.pop(session_id, None)
