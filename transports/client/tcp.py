"""The TCP connection (TLS over it for ``https``) of an HTTP or WebSocket link: opening
it, saying why it could not be opened, and the exceptions of one that failed.

:func:`connect` tries the host's addresses in turn rather than with
``anyio.connect_tcp``: that one's happy-eyeballs race loses a socket that connected
just as the caller was cancelled (a leg cancelled while it connects), left for the
garbage collector to close.  Here a socket is closed on every way out but success.
"""

from __future__ import annotations

import os
import socket
import ssl

import anyio
from anyio.abc import ByteStream, SocketStream
from anyio.streams.tls import TLSStream

__all__ = ["STREAM_FAILURES", "connect", "connect_failure"]

#: What a send or receive on a connection raises when it broke (or we closed it).
STREAM_FAILURES = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


async def connect(host: str, port: int, *, tls: ssl.SSLContext | None = None) -> ByteStream:
    """A stream to ``host:port``; TLS with the ``tls`` context when given (the handshake
    is done on return).  Raises ``OSError`` (``ssl.SSLError`` is one) when that fails."""
    stream = await _open_tcp(host, port)
    if tls is None:
        return stream
    try:
        return await TLSStream.wrap(stream, hostname=host, ssl_context=tls)
    except (anyio.EndOfStream, anyio.BrokenResourceError) as exc:
        await anyio.aclose_forcefully(stream)
        raise OSError("the server closed the connection during the TLS handshake") from exc
    except BaseException:
        await anyio.aclose_forcefully(stream)
        raise


async def _open_tcp(host: str, port: int) -> SocketStream:
    failures: list[OSError] = []
    for family, kind, proto, _, address in await anyio.getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    ):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (a request: one write)
            try:
                sock.connect(address)
            except BlockingIOError:
                await anyio.wait_writable(sock)
                if error := sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    raise OSError(error, os.strerror(error)) from None
            return await SocketStream.from_socket(sock)
        except OSError as exc:
            sock.close()
            failures.append(exc)
        except BaseException:
            sock.close()
            raise
    reasons = dict.fromkeys(exc.strerror or str(exc) for exc in failures)
    raise OSError("; ".join(reasons) or f"no address for {host}")


def connect_failure(exc: OSError) -> str:
    """Why a connection could not be made, in words (``Connection refused``)."""
    return exc.strerror or str(exc)
