"""The access log: one line per request on stderr, for every transport.

The model.  An operator asks "what did this server do, for whom, how fast?"
without a debugger, so each request leaves one line on the logger
``mrtr.server.access`` at INFO:

* HTTP, one per HTTP request, written by the host (``host/access.py``: it sees
  the status and the bytes of every answer, the endpoint's and its own refusals),
  with what the endpoint tells it through the request's ASGI scope (``note_message``):
  the client address, method, path, status, duration, response body bytes, then
  the MCP method and the tool (or prompt, or resource URI) when the request
  carried one::

      127.0.0.1 "POST /mcp" 200 3.1ms 412B tools/call weather

* stdio and WebSocket, one per JSON-RPC request (their transports have no
  status of their own): where it came from, the request id, method and tool,
  and how it ended: ``ok``, ``error CODE`` or ``cancelled``::

      stdio id=7 tools/call weather ok 2.4ms
      ws 127.0.0.1 id=7 tools/call weather error -32602 0.8ms

Off unless the logger is enabled for INFO when the server starts (``mrtr serve
--log-level INFO``; ``--no-access-log`` keeps it off even then).  Off means
free: the host and the stream driver test one attribute per request.  Why off by default: a stdio
server's stderr usually lands in the log of the host that spawned it, where a
line per call is noise, and the default level (WARNING) says "quiet unless
something is wrong" for every transport alike.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import mrtr_core as m

__all__ = [
    "ACCESS_LOGGER",
    "ACCESS_SCOPE_KEY",
    "access_enabled",
    "called_name",
    "http_line",
    "log_rpc",
    "note_message",
]

ACCESS_LOGGER = "mrtr.server.access"
access_log = logging.getLogger(ACCESS_LOGGER)

#: The ASGI scope extension through which a host that writes access lines (ours) lets the
#: endpoint name the request's JSON-RPC message (a dict; absent when the log is off).
ACCESS_SCOPE_KEY = "mrtr.access"

#: The longest name or URI quoted in a line: a peer's text is bounded here.
MAX_SHOWN = 120


def access_enabled() -> bool:
    """Whether access lines are due (checked once, when a server starts)."""
    return access_log.isEnabledFor(logging.INFO)


def shown(text: object) -> str:
    """``text`` as one bounded token of a line: no spaces or control characters."""
    value = str(text)[:MAX_SHOWN]
    return "".join(c if c.isprintable() and not c.isspace() else "?" for c in value) or "-"


def called_name(method: str | None, params: object) -> str | None:
    """What a request acts on: the tool or prompt name, or the resource URI."""
    if not isinstance(params, Mapping):
        return None
    if method in ("tools/call", "prompts/get"):
        name = params.get("name")
    elif method == "resources/read":
        name = params.get("uri")
    else:
        return None
    return name if isinstance(name, str) else None


def log_rpc(
    where: str,
    request: m.Request,
    response: m.ResultResponse | m.ErrorResponse | None,
    sent: bool,
    started: float,
) -> None:
    """The line of one JSON-RPC request on a stream transport (stdio, WebSocket)."""
    if response is None or not sent:
        outcome = "cancelled"
    elif isinstance(response, m.ErrorResponse):
        outcome = f"error {response.error.code}"
    else:
        outcome = "ok"
    name = called_name(request.method, request.params)
    access_log.info(
        "%s id=%s %s%s %s %.1fms",
        where,
        shown(request.id),
        shown(request.method),
        "" if name is None else " " + shown(name),
        outcome,
        (time.perf_counter() - started) * 1000,
    )


def http_line(
    peer: str | None,
    method: bytes,
    target: bytes,
    status: int | None,
    started: float,
    body_bytes: int,
    message: Any,
) -> None:
    """The line of one HTTP request (``message``: its parsed JSON-RPC body, if any)."""
    rpc = ""
    if isinstance(message, Mapping) and isinstance(message.get("method"), str):
        rpc_method = message["method"]
        name = called_name(rpc_method, message.get("params"))
        rpc = " " + shown(rpc_method) + ("" if name is None else " " + shown(name))
    access_log.info(
        '%s "%s %s" %s %.1fms %dB%s',
        peer or "-",
        shown(method.decode("latin-1")),
        shown(target.split(b"?", 1)[0].decode("latin-1")),
        "-" if status is None else status,
        (time.perf_counter() - started) * 1000,
        body_bytes,
        rpc,
    )


def note_message(scope: Mapping[str, Any], message: object) -> None:
    """The endpoint's part of an HTTP line: the JSON-RPC message it read from the body,
    for the host to show (nothing when the host writes no line, or is not ours)."""
    extensions = scope.get("extensions")
    if extensions is not None and ACCESS_SCOPE_KEY in extensions:
        extensions[ACCESS_SCOPE_KEY]["message"] = message
