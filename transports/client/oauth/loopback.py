"""The user agent of a person at a terminal (``mrtr call``): their browser, and a
loopback listener that receives the authorization response (RFC 8252, native apps).

The model: the listener binds 127.0.0.1 on an ephemeral port *before* the
:class:`~.provider.OAuthProvider` is built, so the ``redirect_uri`` it registers
and sends is ``http://127.0.0.1:PORT/callback`` (RFC 8252 section 7.3: the
authorization server accepts any port on the loopback).  For each authorization
the agent shows the URL (``show``), opens a browser on it (``open_browser``,
unless ``None``), and waits, at most ``timeout`` seconds, for the one request the
browser makes to the callback path after the person signs in.  It answers with a
short plain page and returns that request's URL to the provider, which checks
``state``, ``iss`` and the rest (``mrtr_core.auth._client.read_callback``).

What reaches the listener is untrusted (any local process or web page can send
to it): each connection is bounded in size (:data:`MAX_REQUEST_BYTES`) and time
(:data:`REQUEST_SECONDS`), at most :data:`MAX_CONNECTIONS` are served at once
(more are closed unanswered); a request that is not a ``GET`` of the callback
path (405, 404), whose ``Host`` is not the listener's (a DNS-rebinding page,
400), or whose ``state`` is not the one of the authorization under way (400) is
refused and the agent waits on.  The page never echoes the request.

One listener per flow, closed after it: the first is bound when the agent is made
(its port goes into the ``redirect_uri``), a later flow of the same agent (a
step-up) binds the same port again, and between flows nothing listens.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from urllib.parse import parse_qsl, urlsplit

import anyio
import anyio.abc
import h11
from anyio.abc import SocketAttribute

from ..errors import AuthorizationFailed

__all__ = [
    "CALLBACK_PATH",
    "DEFAULT_LOGIN_TIMEOUT",
    "AuthorizationTimedOut",
    "LoopbackUserAgent",
    "loopback_user_agent",
]

CALLBACK_PATH = "/callback"
#: How long a person has to sign in, by default (a login with a second factor, a
#: consent page, a password manager: minutes, not seconds).
DEFAULT_LOGIN_TIMEOUT = 300.0
#: The request line and headers of one request (a browser's are under 2 KiB; the
#: authorization response's query holds a code, a state and an issuer).
MAX_REQUEST_BYTES = 16 * 1024
#: One connection's time to send its request.
REQUEST_SECONDS = 10.0
#: Connections served at once (a browser opens a few; more are closed at once).
MAX_CONNECTIONS = 8

_SIGNED_IN = "Signed in: you can close this window and return to the terminal.\n"
_REFUSED = "The authorization was not granted: you can close this window.\n"


class AuthorizationTimedOut(AuthorizationFailed):
    """No authorization response came back to the loopback listener in time."""

    exit_code = 4  # (the command's "timed out", as a call's own timeout)


class LoopbackUserAgent:
    """The :data:`~.user_agent.UserAgent` of a person: see the module docstring.
    Made by :func:`loopback_user_agent`, which owns the listener."""

    def __init__(
        self,
        listener: anyio.abc.Listener[anyio.abc.SocketStream] | None,
        port: int,
        *,
        show: Callable[[str], None],
        open_browser: Callable[[str], None] | None,
        timeout: float | None,
    ) -> None:
        self._listener = listener
        self.port = port
        self.redirect_uri = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
        self._show = show
        self._open_browser = open_browser
        self._timeout = timeout
        self._host = f"127.0.0.1:{port}"
        self._state: str | None = None
        self._answer: str | None = None
        #: How many requests were refused (the tests' measure).
        self.refused = 0

    def __repr__(self) -> str:
        return f"LoopbackUserAgent({self.redirect_uri!r})"

    async def __call__(self, authorization_url: str) -> str:
        """Show ``authorization_url``, open a browser on it, and return the URL of the
        authorization response the browser brings back to the callback path."""
        query = dict(parse_qsl(urlsplit(authorization_url).query))
        self._state = query.get("state")
        self._answer = None
        listener = self._listener or await self._bind_again()
        self._listener = None
        async with listener:
            self._show(authorization_url)
            if self._open_browser is not None:
                self._open_browser(authorization_url)
            await self._wait(listener)
        if self._answer is None:  # (only with a timeout: without one, the wait ends by an answer)
            raise AuthorizationTimedOut(
                f"no authorization response came back to {self.redirect_uri} "
                f"within {self._timeout:g} s",
                kind="timeout",
            )
        return self._answer

    async def _bind_again(self) -> anyio.abc.Listener[anyio.abc.SocketStream]:
        """This agent's port once more (its ``redirect_uri`` names it)."""
        try:
            return await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
        except OSError as exc:
            raise AuthorizationFailed(
                f"cannot listen on {self.redirect_uri} again ({exc.strerror or exc})",
                kind="connect",
            ) from None

    async def _wait(self, listener: anyio.abc.Listener[anyio.abc.SocketStream]) -> None:
        """Serve ``listener`` until the authorization response came, or the time is up."""
        limiter = anyio.CapacityLimiter(MAX_CONNECTIONS)
        with anyio.move_on_after(math.inf if self._timeout is None else self._timeout):
            async with anyio.create_task_group() as group:

                async def serve(stream: anyio.abc.SocketStream) -> None:
                    try:
                        limiter.acquire_nowait()
                    except anyio.WouldBlock:
                        await stream.aclose()
                        return
                    try:
                        await self._serve(stream)
                    finally:
                        limiter.release()
                    if self._answer is not None:
                        group.cancel_scope.cancel()

                group.start_soon(listener.serve, serve, group)

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        """One connection: read one request (bounded), answer it, close."""
        async with stream:
            with anyio.move_on_after(REQUEST_SECONDS):
                status, text = await self._answer_to(stream)
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.send(_response(status, text))

    async def _answer_to(self, stream: anyio.abc.SocketStream) -> tuple[int, str]:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
        received = 0
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError as exc:
                self.refused += 1
                return exc.error_status_hint, "Bad request.\n"
            if event is h11.NEED_DATA:
                try:
                    data = await stream.receive(MAX_REQUEST_BYTES)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    data = b""
                received += len(data)
                if received > MAX_REQUEST_BYTES:
                    self.refused += 1
                    return 431, "Request too large.\n"
                connection.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                return self._judge(event)
            self.refused += 1  # (the peer closed before a whole request)
            return 400, "Bad request.\n"

    def _judge(self, request: h11.Request) -> tuple[int, str]:
        """The status and page for ``request``; the answer recorded when it is the one."""
        target = request.target.decode("ascii", "replace")
        path, _, query = target.partition("?")
        host = next((v for k, v in request.headers if k == b"host"), b"").decode("latin-1")
        refusal: tuple[int, str] | None = None
        if path != CALLBACK_PATH:
            refusal = 404, "Not found.\n"
        elif request.method != b"GET":
            refusal = 405, "Method not allowed.\n"
        elif host != self._host:
            refusal = 400, "Wrong host.\n"
        elif self._answer is not None or self._state is None:
            refusal = 409, "No sign-in is waiting for an answer.\n"
        else:
            params = dict(parse_qsl(query, keep_blank_values=True))
            if params.get("state") != self._state:
                refusal = 400, "This is not the answer of the sign-in under way.\n"
            else:
                self._answer = f"http://{self._host}{target}"
                return 200, _REFUSED if "error" in params else _SIGNED_IN
        self.refused += 1
        return refusal


_REASONS = {
    200: "OK",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    431: "Request Header Fields Too Large",
}


def _response(status: int, text: str) -> bytes:
    """A whole plain-text response that closes the connection (it never echoes the request)."""
    reason = _REASONS.get(status, "Bad Request")
    body = text.encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\n"
        "Referrer-Policy: no-referrer\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


@asynccontextmanager
async def loopback_user_agent(
    *,
    show: Callable[[str], None],
    open_browser: Callable[[str], None] | None = None,
    timeout: float | None = DEFAULT_LOGIN_TIMEOUT,
) -> AsyncIterator[LoopbackUserAgent]:
    """A :class:`LoopbackUserAgent` listening on 127.0.0.1 (an ephemeral port) for the
    block; build the provider inside it with ``redirect_uri=agent.redirect_uri``.

    ``show(url)`` presents the authorization URL to the person (and may raise to refuse
    it); ``open_browser(url)`` opens a browser on it (``None``: the person does);
    ``timeout``: seconds to wait for the authorization response (``None``: no bound)."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)
    agent = LoopbackUserAgent(listener, port, show=show, open_browser=open_browser, timeout=timeout)
    try:
        yield agent
    finally:
        if agent._listener is not None:  # (no flow ran: the first listener is still open)
            await agent._listener.aclose()
