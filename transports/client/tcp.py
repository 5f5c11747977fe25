"""The TCP connection (TLS over it for ``https``) of an HTTP or WebSocket link: opening
it, saying why it could not be opened, and the exceptions of one that failed."""

from __future__ import annotations

import os
import ssl

import anyio
from anyio.abc import ByteStream

__all__ = ["STREAM_FAILURES", "connect", "connect_failure"]

#: What a send or receive on a connection raises when it broke (or we closed it).
STREAM_FAILURES = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


async def connect(host: str, port: int, *, tls: ssl.SSLContext | None = None) -> ByteStream:
    """A stream to ``host:port``; TLS with the ``tls`` context when given (the handshake
    is done on return).  Raises ``OSError`` (``ssl.SSLError`` is one) when that fails."""
    if tls is None:
        return await anyio.connect_tcp(host, port)
    return await anyio.connect_tcp(host, port, ssl_context=tls)


def connect_failure(exc: OSError) -> str:
    """Why a connection could not be made, the same on every loop: anyio raises "All
    connection attempts failed" with each address's failure as its cause; say those."""
    cause = exc.__cause__
    tried = cause.exceptions if isinstance(cause, BaseExceptionGroup) else (cause,)
    reasons = [os.strerror(e.errno) if e.errno else str(e) for e in tried if isinstance(e, OSError)]
    return "; ".join(dict.fromkeys(reasons)) or exc.strerror or str(exc)
