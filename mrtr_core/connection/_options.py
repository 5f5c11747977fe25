"""A connection's role, its default bounds, and the checks on the options it is built with."""

from __future__ import annotations

import enum
from collections.abc import Mapping

from .._errors import LocalProtocolError
from ..protocol._meta import is_log_level
from ..wire._framing import LineFramer, MessageFramer

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
DEFAULT_MAX_BUFFER_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT = 1024
DEFAULT_MAX_CALLS = 1024
DEFAULT_MAX_FINISHED_IDS = 4096


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"


CLIENT = Role.CLIENT
SERVER = Role.SERVER


def make_framer(
    role: object, framing: str, *, max_message_size: int, max_buffer_size: int
) -> LineFramer | MessageFramer:
    """The framer for ``framing`` (which checks the size bounds), once ``role`` is checked."""
    if not isinstance(role, Role):
        raise LocalProtocolError(f"role must be CLIENT or SERVER, got {role!r}")
    if framing == "lines":
        return LineFramer(max_message_size=max_message_size, max_buffer_size=max_buffer_size)
    if framing == "messages":
        return MessageFramer(max_message_size=max_message_size, max_buffer_size=max_buffer_size)
    raise LocalProtocolError(f"framing must be 'lines' or 'messages', got {framing!r}")


def check_options(
    *,
    cancellation: str,
    era: str,
    log_level: str | None,
    cache_ttl_ms: int,
    cache_scope: str,
    counts: Mapping[str, int],
) -> None:
    """Raise ``LocalProtocolError`` for the first option out of its range."""
    if cancellation not in ("notify", "close_stream"):
        raise LocalProtocolError(
            f"cancellation must be 'notify' or 'close_stream', got {cancellation!r}"
        )
    if era not in ("auto", "modern", "legacy"):
        raise LocalProtocolError(f"era must be 'auto', 'modern' or 'legacy', got {era!r}")
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise LocalProtocolError(f"{name} must be a positive integer, got {value!r}")
    if log_level is not None and not is_log_level(log_level):
        raise LocalProtocolError(f"unknown log level {log_level!r}")
    if cache_scope not in ("public", "private"):
        raise LocalProtocolError("cache_scope must be 'public' or 'private'")
    if not isinstance(cache_ttl_ms, int) or isinstance(cache_ttl_ms, bool) or cache_ttl_ms < 0:
        raise LocalProtocolError("cache_ttl_ms must be a non-negative integer")
