"""What the host bounds for every connection, and the defaults (``docs/transports.md`` says why).

These are the connection-level bounds of ``mrtr serve --http`` (``HttpServer``
options of the same names, with these defaults):

* ``max_connections`` (256): connection slots (``ConnectionSlots``: a
  connection without its whole request yet may be evicted by a newer one; when
  every slot runs a request, a newcomer gets 503 with ``Retry-After: 1``).
* ``max_header_size`` (16 KiB): a request head (431 past it), which also has at
  most ``MAX_HEADER_FIELDS`` (256) fields of at most ``MAX_FIELD_SIZE`` (8 KiB)
  each (``head_refusal``: the one rule of the host and of the MCP endpoint).
* ``max_body_size`` (4 MiB): a request body (413 past it), and so the most a
  refused client's leftover bytes are read and dropped (``refusals.py``).
* ``idle_timeout`` (60 s) for the first byte of a request, ``head_timeout``
  (10 s) from it to the end of the head, ``body_timeout`` (60 s) from the end of
  the head to the end of the body: deadlines (408), not timers a trickled byte resets.
* ``write_timeout`` (60 s): how long the peer may take to accept one write.
* ``shutdown_grace`` (10 s): how long ``aclose`` lets running requests finish.

And for a WebSocket (``websocket.py``; ``mrtr serve --ws``'s ``WsServer`` options
and defaults): ``max_message_size`` (4 MiB: closed with 1009 past it, while it
grows), ``ping_interval`` (20 s) between the host's pings and ``ping_timeout``
(20 s) for the pong (closed with 1011 without one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

import mrtr_core as m

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEAD_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_PING_INTERVAL",
    "DEFAULT_PING_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE",
    "DEFAULT_WRITE_TIMEOUT",
    "HostBounds",
    "MAX_FIELD_SIZE",
    "MAX_HEADER_FIELDS",
    "SHARED_BOUNDS",
    "TOO_LARGE",
    "check_bounds",
    "head_refusal",
    "split_options",
]

DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_MAX_HEADER_SIZE = 16 * 1024
DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_HEAD_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 60.0
DEFAULT_WRITE_TIMEOUT = 60.0
DEFAULT_SHUTDOWN_GRACE = 10.0
DEFAULT_MAX_MESSAGE_SIZE = m.websocket._binding.DEFAULT_MAX_WEBSOCKET_MESSAGE
DEFAULT_PING_INTERVAL = 20.0
DEFAULT_PING_TIMEOUT = 20.0
#: The most header fields one request head may have (Apache's ``LimitRequestFields`` is
#: 100; a real request carries a few dozen): small fields are cheap to send, and each
#: costs a parser and an app far more.
MAX_HEADER_FIELDS = 256
#: The most bytes of one header field, name and value (Apache's ``LimitRequestFieldSize``,
#: nginx's ``large_client_header_buffers``): no real field comes near it.
MAX_FIELD_SIZE = 8 * 1024
TOO_LARGE = "request header fields too large"


def head_refusal(
    target_size: int, headers: Iterable[tuple[bytes, bytes]], max_header_size: int
) -> str | None:
    """Why a request head is refused with 431, or ``None``: more than
    ``MAX_HEADER_FIELDS`` fields, one field over ``MAX_FIELD_SIZE``, or the whole
    (target and fields, each counted as its line) over ``max_header_size``.  The one
    rule of the host (``connection.py``) and of the MCP endpoint under a foreign server,
    which measures the head it is handed (a server may let any head through)."""
    total = target_size
    count = longest = 0
    for name, value in headers:
        line = len(name) + len(value) + 4  # "name: value\r\n"
        count += 1
        total += line
        longest = max(longest, line)
    if total > max_header_size:
        return TOO_LARGE
    if longest > MAX_FIELD_SIZE:
        return f"{TOO_LARGE}: a field longer than {MAX_FIELD_SIZE} bytes"
    if count > MAX_HEADER_FIELDS:
        return f"{TOO_LARGE}: more than {MAX_HEADER_FIELDS} fields"
    return None


def check_bounds(
    counts: Iterable[tuple[str, int]], seconds: Iterable[tuple[str, float]] = ()
) -> None:
    """``ValueError`` naming the first count below 1 (or not an int) or duration not above 0:
    how the host and the MCP endpoint refuse a bound out of range."""
    for name, value in counts:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer")
    for name, duration in seconds:
        if not duration > 0:
            raise ValueError(f"{name} must be a positive number of seconds")


@attrs.frozen(kw_only=True)
class HostBounds:
    """Every connection bound of the host; ``ValueError`` for one out of range."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    head_timeout: float = DEFAULT_HEAD_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    write_timeout: float = DEFAULT_WRITE_TIMEOUT
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    ping_interval: float = DEFAULT_PING_INTERVAL
    ping_timeout: float = DEFAULT_PING_TIMEOUT

    def __attrs_post_init__(self) -> None:
        check_bounds(
            (
                ("max_connections", self.max_connections),
                ("max_header_size", self.max_header_size),
                ("max_body_size", self.max_body_size),
                ("max_message_size", self.max_message_size),
            ),
            (
                ("idle_timeout", self.idle_timeout),
                ("head_timeout", self.head_timeout),
                ("body_timeout", self.body_timeout),
                ("write_timeout", self.write_timeout),
                ("ping_interval", self.ping_interval),
                ("ping_timeout", self.ping_timeout),
            ),
        )

    @property
    def request_bytes(self) -> int:
        """One request's worth: the most a lingering close or a watcher reads."""
        return self.max_header_size + self.max_body_size


#: Bounds the host and an MCP endpoint (``McpAsgi``) both take, each for its own rule
#: (the endpoint checks them too, for a foreign server; given to one side alone, the
#: other's default would cut in first).  ``body_timeout`` is the host's alone: the
#: endpoint is told it has none to keep (``ENDPOINT_ON_HOST``).
SHARED_BOUNDS = frozenset({"max_body_size", "max_header_size", "write_timeout"})
#: What the endpoint is given when it runs on this host: the body's deadline is the
#: host's (408, from the end of the head), so the endpoint keeps none of its own (a
#: cancel scope per request less), and the host measured the head (431) with the same
#: ``max_header_size``, so the endpoint does not measure it again.
ENDPOINT_ON_HOST: dict[str, Any] = {"body_timeout": math.inf, "server_checks_head": True}


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``HttpServer``-style options (``mrtr serve --http``'s) as (the host's bounds, the
    endpoint's options): each bound of ``HostBounds`` to the host, the rest (path, access
    policy, listen pool, ...) to the endpoint, and ``SHARED_BOUNDS`` to both (an
    endpoint run on this host is given ``ENDPOINT_ON_HOST`` besides)."""
    names = set(attrs.fields_dict(HostBounds))
    host = {name: value for name, value in options.items() if name in names}
    app = {
        name: value for name, value in options.items() if name not in names or name in SHARED_BOUNDS
    }
    return host, app
