"""The browser of URL-elicitation tests, and ``mrtr serve --http`` as a subprocess.

``browse`` makes one HTTP/1.1 request to a 127.0.0.1 URL, as a browser's
navigation would; ``callback_of`` is where a provider redirects the browser
(the shown URL's ``redirect_uri`` with its ``state``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import parse_qs, urlencode, urlsplit

import h11
import trio

from support.serve_subprocess import mrtr_serve


class Page:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


async def browse(url: str, headers: Mapping[str, str] | None = None, method: str = "GET") -> Page:
    """One HTTP/1.1 request to a 127.0.0.1 URL, as a browser would navigate to it."""
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1" and parts.port is not None
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    stream = await trio.open_tcp_stream("127.0.0.1", parts.port)
    conn = h11.Connection(h11.CLIENT)
    fields = {"host": parts.netloc, **(headers or {})}
    data = conn.send(h11.Request(method=method, target=target, headers=list(fields.items())))
    await stream.send_all((data or b"") + (conn.send(h11.EndOfMessage()) or b""))
    body = b""
    response: h11.Response | None = None
    with trio.fail_after(10):
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
    await stream.aclose()
    assert response is not None
    found = {k.decode().lower(): v.decode() for k, v in response.headers}
    return Page(response.status_code, found, body)


def callback_of(shown_url: str, **params: str) -> str:
    """The URL the provider would redirect to: its ``redirect_uri`` with our ``state``."""
    query = parse_qs(urlsplit(shown_url).query)
    return query["redirect_uri"][0] + "?" + urlencode({**params, "state": query["state"][0]})


@asynccontextmanager
async def mrtr_serve_http(*flags: str) -> AsyncIterator[str]:
    """``mrtr serve --http 127.0.0.1:0 FLAGS`` (the example app): its endpoint URL."""
    async with mrtr_serve(["--http", "127.0.0.1:0", *flags]) as url:
        yield url
