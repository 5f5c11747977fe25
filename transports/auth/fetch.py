"""A bounded HTTP exchange for a verifier (a JWKS, an introspection endpoint): one
request, at most ``max_bytes`` of body, ``timeout`` seconds for all of it (redirects
included), at most ``max_redirects`` redirects (to ``https`` only, unless the first URL
was ``http``); on h11 and the client's TCP/TLS connection, so on trio and asyncio.

A source that is too big, too slow or broken is :class:`FetchFailed`, whose message
names the URL and the bound, never a request header (an introspection request carries
the token and the server's credentials).
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from urllib.parse import urljoin, urlsplit

import anyio
import attrs
import h11

from ..client.tcp import STREAM_FAILURES, connect

__all__ = ["FetchFailed", "Fetched", "fetch"]

_READ = 65536
_REDIRECTS = (301, 302, 303, 307, 308)


class FetchFailed(Exception):
    """The exchange failed or met a bound (no response to use)."""


@attrs.frozen
class Fetched:
    status: int
    content_type: str
    body: bytes


async def fetch(
    url: str,
    *,
    method: str = "GET",
    body: bytes = b"",
    headers: Sequence[tuple[str, str]] = (),
    max_bytes: int,
    timeout: float,
    max_redirects: int = 0,
    tls: ssl.SSLContext | None = None,
) -> Fetched:
    """``method`` ``url`` within the bounds; a redirect is followed (as a GET) only
    for a GET and only ``max_redirects`` times."""
    plain_allowed = urlsplit(url).scheme == "http"
    try:
        with anyio.fail_after(timeout):
            for _ in range(max_redirects + 1):
                fetched, location = await _exchange(
                    url, method, body, headers, max_bytes, tls, plain_allowed
                )
                if location is None:
                    return fetched
                if method != "GET":
                    raise FetchFailed(f"{_where(url)} redirected a {method}: not followed")
                url = urljoin(url, location)
            raise FetchFailed(f"{_where(url)}: more than {max_redirects} redirect(s)")
    except TimeoutError:
        raise FetchFailed(f"{_where(url)} took longer than {timeout} s") from None


def _where(url: str) -> str:
    """The URL without its query (a secret may ride there) for a message."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


async def _exchange(
    url: str,
    method: str,
    body: bytes,
    headers: Sequence[tuple[str, str]],
    max_bytes: int,
    tls: ssl.SSLContext | None,
    plain_allowed: bool,
) -> tuple[Fetched, str | None]:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise FetchFailed(f"not an http(s) URL: {_where(url)}")
    if parts.scheme == "http" and not plain_allowed:
        raise FetchFailed(f"{_where(url)}: a redirect from https to http is not followed")
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    context = (tls or ssl.create_default_context()) if secure else None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    fields = [("host", parts.netloc), ("user-agent", "mrtr"), ("accept", "application/json")]
    fields += list(headers)
    if method != "GET":
        fields.append(("content-length", str(len(body))))
    try:
        stream = await connect(parts.hostname, port, tls=context)
    except OSError as exc:
        raise FetchFailed(f"{_where(url)}: cannot connect ({exc.__class__.__name__})") from None
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=16 * 1024)
    try:
        data = conn.send(h11.Request(method=method, target=target, headers=fields))
        if body:
            data += conn.send(h11.Data(data=body))
        data += conn.send(h11.EndOfMessage())
        await stream.send(data)
        status, content_type, location = 0, "", None
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
                status = event.status_code
                for name, value in event.headers:
                    if name == b"content-type":
                        content_type = value.decode("latin-1")
                    elif name == b"location":
                        location = value.decode("latin-1")
                    elif name == b"content-length" and int(value) > max_bytes:
                        raise FetchFailed(f"{_where(url)}: body larger than {max_bytes} bytes")
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > max_bytes:
                    raise FetchFailed(f"{_where(url)}: body larger than {max_bytes} bytes")
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise FetchFailed(f"{_where(url)}: the connection closed mid-response")
    except h11.RemoteProtocolError as exc:
        raise FetchFailed(f"{_where(url)}: a malformed response ({exc})") from None
    except STREAM_FAILURES as exc:
        raise FetchFailed(
            f"{_where(url)}: the connection failed ({exc.__class__.__name__})"
        ) from None
    finally:
        await anyio.aclose_forcefully(stream)
    fetched = Fetched(status, content_type, b"".join(chunks))
    if status in _REDIRECTS and location:
        return fetched, location
    return fetched, None
