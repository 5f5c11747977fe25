"""The access log: one line per request on stderr, for every transport.

The model.  An operator asks "what did this server do, for whom, how fast?"
without a debugger, so each request leaves one line on the logger
``mrtr.server.access`` at INFO:

* HTTP (``http/access.py``), one per HTTP request: the client address, method,
  path, status, duration, response body bytes, then the MCP method and the tool
  (or prompt, or resource URI) when the request carried one::

      127.0.0.1 "POST /mcp" 200 3.1ms 412B tools/call weather

* stdio and WebSocket, one per JSON-RPC request (their transports have no
  status of their own): where it came from, the request id, method and tool,
  and how it ended: ``ok``, ``error CODE`` or ``cancelled``::

      stdio id=7 tools/call weather ok 2.4ms
      ws 127.0.0.1 id=7 tools/call weather error -32602 0.8ms

Off unless the logger is enabled for INFO when the server starts (``mrtr serve
--log-level INFO``; ``--no-access-log`` keeps it off even then).  Off means
free: the HTTP server then serves with the plain connection class, and the
stream driver tests one attribute per request.  Why off by default: a stdio
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

__all__ = ["ACCESS_LOGGER", "access_enabled", "called_name", "http_line", "log_rpc"]

ACCESS_LOGGER = "mrtr.server.access"
access_log = logging.getLogger(ACCESS_LOGGER)

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
