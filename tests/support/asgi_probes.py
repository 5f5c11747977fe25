"""Probes of what an ASGI server bounds before a request reaches the endpoint: a head with
one big header (``big_header``) or many small ones (``many_headers``), a head or a body
trickled a byte at a time (``trickle``, ``trickle_body``), many idle connections
(``idle_connections``).  Each speaks raw
HTTP/1.1 on a socket of its own and reports what the server did (docs/asgi.md's table
is measured with them)."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import attrs

from support.raw_http import ACCEPT_BOTH


@attrs.frozen
class Outcome:
    """What the server did: the status it answered (``None``: none) and after how many
    seconds the connection ended (``None``: still open when the probe gave up)."""

    status: int | None
    closed_after: float | None


def _address(base: str) -> tuple[str, int]:
    parts = urlsplit(base)
    return parts.hostname or "127.0.0.1", parts.port or 80


def _status_of(data: bytes) -> int | None:
    if data.startswith(b"HTTP/1.1 "):
        return int(data[9:12])
    return None


def big_header(base: str, size: int, *, timeout: float = 10.0) -> Outcome:
    """A ``GET /healthz`` with a header of ``size`` bytes, sent at once."""
    host, port = _address(base)
    head = (
        f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {ACCEPT_BOTH}\r\n"
        f"X-Pad: {'a' * size}\r\nConnection: close\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        try:
            sock.sendall(head)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        except TimeoutError:
            return Outcome(None, None)
    return Outcome(_status_of(data), time.monotonic() - started)


def many_headers(base: str, count: int, *, timeout: float = 10.0) -> Outcome:
    """A ``GET /healthz`` whose head has ``count`` header fields in all (small ones)."""
    host, port = _address(base)
    fillers = "".join(f"X-F{index}: v\r\n" for index in range(count - 3))
    head = (
        f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {ACCEPT_BOTH}\r\n"
        f"{fillers}Connection: close\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        try:
            sock.sendall(head)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        except TimeoutError:
            return Outcome(None, None)
    return Outcome(_status_of(data), time.monotonic() - started)


def trickle(base: str, *, give_up: float = 20.0, interval: float = 1.0) -> Outcome:
    """A head sent one byte every ``interval`` seconds, until the server ends the
    connection or ``give_up`` seconds pass."""
    host, port = _address(base)
    head = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: " + "a" * 1000
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=interval) as sock:
        for byte in head.encode():
            if time.monotonic() - started > give_up:
                return Outcome(None, None)
            try:
                sock.sendall(bytes([byte]))
                data = sock.recv(65536)  # waits at most `interval`: the pace of the trickle
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return Outcome(None, time.monotonic() - started)
            return Outcome(_status_of(data), time.monotonic() - started)  # an answer, or EOF
    return Outcome(None, None)


def trickle_body(base: str, *, give_up: float = 20.0, interval: float = 1.0) -> Outcome:
    """A POST whose head arrives at once and whose body (1000 bytes declared) comes one
    byte every ``interval`` seconds, until the server answers or ends the connection."""
    host, port = _address(base)
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {ACCEPT_BOTH}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=interval) as sock:
        sock.sendall(head)
        while time.monotonic() - started < give_up:
            try:
                sock.sendall(b" ")
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return Outcome(None, time.monotonic() - started)
            return Outcome(_status_of(data), time.monotonic() - started)
    return Outcome(None, None)


def idle_connections(base: str, count: int, *, wait: float = 1.0) -> list[Outcome]:
    """``count`` connections that send nothing, then one real request: did it get through?
    (The last outcome is the request's.)"""
    host, port = _address(base)
    idle = [socket.create_connection((host, port), timeout=wait) for _ in range(count)]
    try:
        time.sleep(wait)
        return [big_header(base, 10)]
    finally:
        for sock in idle:
            sock.close()
