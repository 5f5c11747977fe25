"""One bounded HTTP/1.1 exchange outside MCP: the OAuth client's metadata, registration
and token requests, and the resource server's JWKS and introspection requests.

One request and its whole response, bounded in size (``max_bytes``: a ``Content-Length``
past it is refused before the body comes), in time (``timeout``, for all of it,
redirects included) and in redirects (``max_redirects``, 0 by default: a caller that
wants the ``Location`` reads it; past the bound the redirect itself is the answer; one
is followed only for a ``GET``, and never from ``https`` to ``http``), on the
project's own connection machinery (``tcp.connect`` and h11, as the MCP link), so on
trio and asyncio.  A failure is :class:`FetchFailed`,
whose message names the URL without its query or credentials (a query may carry a code
or a state) and never a request header (one may carry a token or a secret).
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import anyio
import h11

from .errors import TransportError
from .tcp import STREAM_FAILURES, connect

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_TIMEOUT", "FetchFailed", "Fetched", "fetch", "shown_url"]

#: A metadata document, a registration, a token response or a key set is a few KiB.
DEFAULT_MAX_BYTES = 256 * 1024
DEFAULT_TIMEOUT = 10.0
_READ = 65536
_REDIRECTS = (301, 302, 303, 307, 308)


class FetchFailed(TransportError):
    """A fetch that failed: the connection, the time or size bound, bad HTTP."""


@dataclass(frozen=True, slots=True)
class Fetched:
    status: int
    #: The response's fields, names lower-cased, in order.
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k == name]

    @property
    def content_type(self) -> str:
        return self.header("content-type") or ""


def shown_url(url: str) -> str:
    """``url`` as an error shows it: no query, no fragment, no credentials."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


async def fetch(
    url: str,
    *,
    method: str = "GET",
    body: bytes = b"",
    headers: Sequence[tuple[str, str]] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    max_redirects: int = 0,
    tls: ssl.SSLContext | None = None,
) -> Fetched:
    """``method`` ``url`` with ``body`` and ``headers`` (after ``Host``, ``User-Agent``,
    ``Accept: application/json`` and, unless a ``GET``, ``Content-Length``), within
    the bounds of the module docstring."""
    plain_allowed = urlsplit(url).scheme == "http"
    try:
        with anyio.fail_after(timeout):
            redirects = 0
            while True:
                fetched, location = await _exchange(
                    url, method, body, headers, max_bytes, tls, plain_allowed
                )
                # (past the bound, the redirect itself is the answer: its caller reads it)
                if location is None or redirects == max_redirects:
                    return fetched
                if method != "GET":
                    raise FetchFailed(f"{shown_url(url)} redirected a {method}: not followed")
                url = urljoin(url, location)
                redirects += 1
    except TimeoutError:
        raise FetchFailed(
            f"{method} {shown_url(url)} took more than {timeout:g} s", kind="timeout"
        ) from None


async def _exchange(
    url: str,
    method: str,
    body: bytes,
    headers: Sequence[tuple[str, str]],
    max_bytes: int,
    tls: ssl.SSLContext | None,
    plain_allowed: bool,
) -> tuple[Fetched, str | None]:
    """One request; the response, and where it redirects to (if it does and may)."""
    parts = urlsplit(url)
    where = shown_url(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise FetchFailed(f"not an http(s) URL: {where!r}")
    if parts.scheme == "http" and not plain_allowed:
        raise FetchFailed(f"{where}: a redirect from https to http is not followed")
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    context = (tls or ssl.create_default_context()) if secure else None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    fields = [
        ("host", parts.netloc.rpartition("@")[2]),
        ("user-agent", "mrtr"),
        ("accept", "application/json"),
    ]
    if method != "GET":
        fields.append(("content-length", str(len(body))))
    fields += list(headers)
    try:
        stream: Any = await connect(parts.hostname, port, tls=context)
    except OSError as exc:
        raise FetchFailed(
            f"{method} {where} failed: cannot connect ({type(exc).__name__})", kind="connect"
        ) from None
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=16 * 1024)
    try:
        data = conn.send(h11.Request(method=method, target=target, headers=fields)) or b""
        if body:
            data += conn.send(h11.Data(data=body)) or b""
        data += conn.send(h11.EndOfMessage()) or b""
        await stream.send(data)
        response: h11.Response | None = None
        chunks: list[bytes] = []
        size = 0
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                try:
                    conn.receive_data(await stream.receive(_READ))
                except anyio.EndOfStream:
                    conn.receive_data(b"")
                continue
            if isinstance(event, h11.Response):
                response = event
                for name, value in event.headers:
                    if name == b"content-length" and int(value) > max_bytes:
                        raise FetchFailed(
                            f"{method} {where}: the response passed {max_bytes} bytes"
                        )
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > max_bytes:
                    raise FetchFailed(f"{method} {where}: the response passed {max_bytes} bytes")
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise FetchFailed(f"{method} {where}: the connection closed mid-response")
    except h11.ProtocolError as exc:
        raise FetchFailed(f"{method} {where}: a malformed response ({exc})") from None
    except STREAM_FAILURES as exc:
        raise FetchFailed(
            f"{method} {where} failed: {type(exc).__name__}", kind="connect"
        ) from None
    finally:
        await anyio.aclose_forcefully(stream)
    assert response is not None  # (EndOfMessage comes after the Response)
    fetched = Fetched(
        status=response.status_code,
        headers=[(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in response.headers],
        body=b"".join(chunks),
    )
    location = fetched.header("location")
    if fetched.status in _REDIRECTS and location:
        return fetched, location
    return fetched, None
