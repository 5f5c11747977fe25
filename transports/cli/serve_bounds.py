"""`mrtr serve`'s bound options: each flag and the server keyword it sets.

``mrtr serve`` lets an operator set the HTTP and WebSocket servers' bounds
(``docs/transports.md`` says what each bounds and why its default is what it
is).  Each one here is a flag, the keyword of ``HttpServer`` or ``WsServer`` it
sets, its type and a few words for ``--help``, whose default is read from the
server itself (one home for each default).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HTTP_BOUNDS", "WS_BOUNDS", "HttpBound", "WsBound"]


@dataclass(frozen=True, slots=True)
class HttpBound:
    """One bound of the HTTP server that the command line can set (``docs/transports.md``)."""

    flag: str
    option: str  # the keyword of ``HttpServer``
    kind: type[int] | type[float]
    what: str

    @property
    def default(self) -> str:
        from ..server import http  # only for --help: stdio never imports the HTTP server

        value = (http.HttpServer.__init__.__kwdefaults__ or {})[self.option]
        return str(value) if self.kind is int else f"{value:g}"


#: The HTTP server's bounds, as flags; each one is a keyword of ``HttpServer``.
HTTP_BOUNDS = (
    HttpBound("--max-connections", "max_connections", int, "connections served at once"),
    HttpBound("--max-body-size", "max_body_size", int, "bytes of one request body"),
    HttpBound("--idle-timeout", "idle_timeout", float, "wait for a request's first byte"),
    HttpBound("--head-timeout", "head_timeout", float, "a request head, from its first byte"),
    HttpBound("--body-timeout", "body_timeout", float, "a request body, once its head is in"),
    HttpBound("--write-timeout", "write_timeout", float, "one write to a client that stalls"),
    HttpBound("--max-listen-streams", "max_listen_streams", int, "listen streams in all"),
    HttpBound(
        "--max-listen-per-client",
        "max_listen_streams_per_client",
        int,
        "listen streams of one client address",
    ),
    HttpBound("--listen-lifetime", "listen_lifetime", float, "how long a listen stream lasts"),
    HttpBound("--max-sessions", "max_sessions", int, "2025-era sessions held at once"),
    HttpBound(
        "--session-idle-timeout",
        "session_idle_timeout",
        float,
        "a 2025-era session without work ends after",
    ),
    HttpBound(
        "--replay-events", "replay_buffer_events", int, "SSE events a session keeps to resume"
    ),
    HttpBound("--replay-bytes", "replay_buffer_bytes", int, "bytes of SSE events a session keeps"),
    HttpBound(
        "--max-session-streams", "max_session_streams", int, "SSE streams of 2025-era sessions"
    ),
    HttpBound(
        "--max-streams-per-session",
        "max_streams_per_session",
        int,
        "open SSE streams of one 2025-era session",
    ),
    HttpBound(
        "--max-sessions-per-client",
        "max_sessions_per_client",
        int,
        "2025-era sessions of one client address",
    ),
    HttpBound(
        "--max-session-streams-per-client",
        "max_session_streams_per_client",
        int,
        "SSE streams of one client address's 2025-era sessions",
    ),
    HttpBound(
        "--session-stream-lifetime",
        "session_stream_lifetime",
        float,
        "how long a 2025-era session's GET stream lasts",
    ),
    HttpBound(
        "--legacy-answer-timeout",
        "legacy_answer_timeout",
        float,
        "a 2025-era client's answer to one server question",
    ),
)


@dataclass(frozen=True, slots=True)
class WsBound:
    """One bound of the WebSocket server that the command line can set."""

    flag: str
    option: str  # the keyword of ``WsServer``
    kind: type[int] | type[float]
    what: str

    @property
    def default(self) -> str:
        from ..server import ws  # only for --help

        value = (ws.WsServer.__init__.__kwdefaults__ or {})[self.option]
        return str(value) if self.kind is int else f"{value:g}"


#: The WebSocket server's own bounds, as flags (``--max-connections`` is shared with HTTP).
WS_BOUNDS = (
    WsBound("--max-message-size", "max_message_size", int, "bytes of one message"),
    WsBound("--ping-interval", "ping_interval", float, "seconds between keep-alive pings"),
    WsBound("--ping-timeout", "ping_timeout", float, "seconds a pong may take"),
)
