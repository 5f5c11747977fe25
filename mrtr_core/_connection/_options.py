"""A connection's role, its default bounds, and the checks on the options it is built with."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import LocalProtocolError, describe
from .._meta import ALL_VERSIONS, LEGACY_VERSIONS, MODERN_VERSIONS, is_log_level
from ..wire._codec import Codec, JsonName
from ..wire._depth import DEFAULT_MAX_DEPTH
from ..wire._framing import LineFramer, MessageFramer
from ..wire._inputs import InputRegistry

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


def split_versions(versions: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``versions`` (newest first) as its 2026-era and 2025-era parts, in order."""
    modern = tuple(v for v in versions if v in MODERN_VERSIONS)
    legacy = tuple(v for v in versions if v in LEGACY_VERSIONS)
    if len(modern) + len(legacy) != len(versions) or not versions:
        raise LocalProtocolError(f"versions must be a non-empty subset of {ALL_VERSIONS}")
    return modern, legacy


def check_input_kinds(input_kinds: Any) -> None:
    if not isinstance(input_kinds, InputRegistry):
        raise LocalProtocolError(
            f"input_kinds must be an InputRegistry, got {describe(input_kinds)}"
        )


def codec_for(json: JsonName | Codec, max_depth: int | None) -> Codec:
    """The codec a connection reads and writes with: a given one as it is, unless
    ``max_depth`` overrides its depth (then one like it with that depth)."""
    if isinstance(json, Codec) and max_depth is None:
        return json
    backend = json.backend if isinstance(json, Codec) else json
    return Codec(backend, max_depth=DEFAULT_MAX_DEPTH if max_depth is None else max_depth)
