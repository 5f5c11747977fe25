"""One bounded HTTP/1.1 exchange for the OAuth flow: metadata, registration, tokens,
and the headless user agent's authorization request.

Every fetch is bounded in size (``max_bytes``), time (``timeout``, the whole exchange)
and redirects (none are followed: a caller that wants the ``Location`` reads it), on
the project's own connection machinery (``tcp.connect`` and h11, as the MCP link).
A failure is :class:`FetchFailed`, whose message names the URL without its query
(a query may carry a code or state) and never a request header.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import anyio
import h11

from ..errors import TransportError
from ..tcp import STREAM_FAILURES, connect

__all__ = ["FetchFailed", "Fetched", "fetch", "fetch_json", "shown_url"]

#: A metadata document, a registration or a token response is a few KiB.
DEFAULT_MAX_BYTES = 256 * 1024
DEFAULT_TIMEOUT = 10.0
_READ = 65536


class FetchFailed(TransportError):
    """An OAuth fetch that failed: the connection, the time or size bound, bad HTTP."""


@dataclass(frozen=True, slots=True)
class Fetched:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k == name]


def shown_url(url: str) -> str:
    """``url`` as an error shows it: no query, no fragment, no credentials."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


async def fetch(
    url: str,
    *,
    method: str = "GET",
    form: dict[str, str] | None = None,
    json_body: Any = None,
    headers: Sequence[tuple[str, str]] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    ssl_context: ssl.SSLContext | None = None,
) -> Fetched:
    """One request to ``url`` and its whole response (see the module docstring)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchFailed(f"not an http(s) URL: {shown_url(url)!r}")
    https = parts.scheme == "https"
    body = b""
    head = [
        ("Host", parts.netloc.rpartition("@")[2]),
        ("User-Agent", "mrtr"),
        ("Accept", "application/json"),
    ]
    if form is not None:
        body = urlencode(form).encode()
        head.append(("Content-Type", "application/x-www-form-urlencoded"))
    elif json_body is not None:
        body = json.dumps(json_body).encode()
        head.append(("Content-Type", "application/json"))
    if method != "GET":
        head.append(("Content-Length", str(len(body))))
    head += list(headers)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    where = shown_url(url)
    try:
        with anyio.fail_after(timeout):
            tls = (ssl_context or ssl.create_default_context()) if https else None
            stream = await connect(parts.hostname, parts.port or (443 if https else 80), tls=tls)
            try:
                return await _exchange(stream, method, target, head, body, max_bytes, where)
            finally:
                await anyio.aclose_forcefully(stream)
    except TimeoutError:
        raise FetchFailed(
            f"{method} {where} took more than {timeout:g} s", kind="timeout"
        ) from None
    except (*STREAM_FAILURES, h11.ProtocolError) as exc:
        raise FetchFailed(
            f"{method} {where} failed: {type(exc).__name__}", kind="connect"
        ) from None


async def _exchange(
    stream: Any,
    method: str,
    target: str,
    head: list[tuple[str, str]],
    body: bytes,
    max_bytes: int,
    where: str,
) -> Fetched:
    conn = h11.Connection(h11.CLIENT)
    data = conn.send(h11.Request(method=method, target=target, headers=head))
    if body:
        data += conn.send(h11.Data(data=body))
    data += conn.send(h11.EndOfMessage())
    await stream.send(data)
    response: Any = None
    chunks: list[bytes] = []
    size = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                received = await stream.receive(_READ)
            except anyio.EndOfStream:
                received = b""
            conn.receive_data(received)
            continue
        if isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > max_bytes:
                raise FetchFailed(f"{method} {where}: the response passed {max_bytes} bytes")
            chunks.append(bytes(event.data))
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            break
    if response is None:
        raise FetchFailed(f"{method} {where}: no response")
    return Fetched(
        status=response.status_code,
        headers=[(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in response.headers],
        body=b"".join(chunks),
    )


def read_json(fetched: Fetched, url: str) -> Any:
    """The body as JSON (``FetchFailed`` when it is not)."""
    try:
        return json.loads(fetched.body)
    except ValueError:
        raise FetchFailed(
            f"{shown_url(url)} answered HTTP {fetched.status} with a body that is not JSON",
            kind="http",
            status=fetched.status,
        ) from None


async def fetch_json(url: str, **options: Any) -> tuple[int, Any]:
    """``fetch`` and the body as JSON: ``(status, value)``."""
    fetched = await fetch(url, **options)
    return fetched.status, read_json(fetched, url)
