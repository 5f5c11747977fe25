"""How the client commands reach a server: the TARGET, ``--header``, the client opened.

``mrtr call``, ``mrtr get-prompt``, ``mrtr read`` and ``mrtr list`` all take a
``TARGET``: an ``http://`` or ``https://`` URL (Streamable HTTP), a ``ws://``
URL (WebSocket) or ``stdio:COMMAND ARGS...`` (a server command split with
POSIX shell-word rules).  :func:`open_target` opens a client on it.

``--header NAME:VALUE`` adds a header to every HTTP request (and to the
WebSocket handshake): ``Authorization: Bearer ...``, an API key, a tenant.
Checked before anything is sent (:func:`parse_header`, with the core's header
rules, ``mrtr_core.http._headers.is_header_name``/``is_header_value``): the name an
HTTP token, the value visible ASCII, spaces and tabs (no CR, LF or other control
characters: no header injection), both bounded (:data:`MAX_HEADER_NAME`,
:data:`MAX_HEADER_VALUE`, at most :data:`MAX_HEADERS` of them).  The headers the
protocol itself sets (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``,
``Mcp-Param-*``, ``Mcp-Session-Id``, ``Content-Type``, ``Accept``, ``Host``,
...) cannot be given: the client writes them from the message, and a second,
different value would only make the server refuse the request.  On a stdio
TARGET there are no headers: ``--header`` there is a usage error.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from mrtr_core.http import (
    Header,
)
from mrtr_core.http._headers import is_header_name, is_header_value

from ..client.client import Client

__all__ = [
    "MAX_HEADERS",
    "MAX_HEADER_NAME",
    "MAX_HEADER_VALUE",
    "UsageError",
    "open_target",
    "parse_header",
    "parse_target",
]

MAX_HEADERS = 64
MAX_HEADER_NAME = 256
MAX_HEADER_VALUE = 8 * 1024

#: Headers the client writes itself (lower case); ``Mcp-Param-*`` by prefix.
RESERVED_HEADERS = frozenset(
    name.lower()
    for name in (
        Header.PROTOCOL_VERSION,
        Header.METHOD,
        Header.NAME,
        Header.SESSION_ID,
        Header.LAST_EVENT_ID,
        "Accept",
        "Connection",
        "Content-Length",
        "Content-Type",
        "Host",
        "Transfer-Encoding",
        "Upgrade",
        "Sec-WebSocket-Key",
        "Sec-WebSocket-Version",
        "Sec-WebSocket-Protocol",
        "Sec-WebSocket-Extensions",
    )
)


class UsageError(Exception):
    """A command-line mistake found after parsing (exit 2)."""


def parse_target(target: str) -> tuple[str, str | list[str]]:
    """``("http", url)``, ``("ws", url)`` or ``("stdio", argv)``; :class:`UsageError` else."""
    if target.startswith("stdio:"):
        try:
            argv = shlex.split(target[len("stdio:") :])
        except ValueError as exc:
            raise UsageError(f"TARGET {target!r}: {exc}") from exc
        if not argv:
            raise UsageError("TARGET stdio: needs a command, e.g. stdio:'mrtr serve --stdio'")
        return "stdio", argv
    if re.match(r"https?://[^/\s]", target, re.IGNORECASE):
        return "http", target
    if re.match(r"ws://[^/\s]", target, re.IGNORECASE):
        return "ws", target
    raise UsageError(
        f"TARGET {target!r}: expected http(s)://... or stdio:COMMAND ARGS... or ws://..."
    )


def parse_header(text: str) -> tuple[str, str]:
    """``NAME:VALUE`` (spaces around the value dropped) as ``(NAME, VALUE)``, checked."""
    name, colon, value = text.partition(":")
    if not colon:
        raise UsageError(f"--header {_shown(text)}: expected NAME:VALUE")
    value = value.strip(" \t")
    if len(name) > MAX_HEADER_NAME or not is_header_name(name):
        raise UsageError(
            f"--header {_shown(name)}: a header name is letters, digits and !#$%&'*+-.^_`|~ "
            f"(at most {MAX_HEADER_NAME})"
        )
    if len(value) > MAX_HEADER_VALUE:
        raise UsageError(f"--header {name}: the value is longer than {MAX_HEADER_VALUE}")
    if not is_header_value(value):
        raise UsageError(
            f"--header {name}: the value may hold visible ASCII and spaces only "
            "(no CR, LF or other control characters)"
        )
    lowered = name.lower()
    if lowered in RESERVED_HEADERS or lowered.startswith(Header.PARAM_PREFIX.lower()):
        raise UsageError(f"--header {name}: the client sets this header itself")
    return name, value


def parse_headers(texts: Sequence[str], kind: str) -> list[tuple[str, str]]:
    """Every ``--header``, checked, for a TARGET of ``kind``."""
    if not texts:
        return []
    if kind == "stdio":
        raise UsageError("--header: a stdio TARGET has no headers (HTTP and WebSocket only)")
    if len(texts) > MAX_HEADERS:
        raise UsageError(f"--header: at most {MAX_HEADERS} of them")
    return [parse_header(text) for text in texts]


def _shown(text: str) -> str:
    return repr(text[:80] + ("..." if len(text) > 80 else ""))


def open_target(
    kind: str,
    where: str | list[str],
    headers: Sequence[tuple[str, str]],
    options: dict[str, Any],
) -> AbstractAsyncContextManager[Client]:
    """A client on the TARGET ``parse_target`` read (its era settled on entry)."""
    if kind == "stdio":
        from ..client.stdio import open_stdio_client

        assert isinstance(where, list)
        return open_stdio_client(where, **options)
    assert isinstance(where, str)
    if kind == "ws":
        from ..client.ws import open_ws_client

        return open_ws_client(where, headers=list(headers), **options)
    from ..client.http import open_http_client

    return open_http_client(where, headers=list(headers), **options)
