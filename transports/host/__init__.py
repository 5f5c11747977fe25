"""The host: an ASGI 3 server on anyio and h11 (trio or asyncio) that bounds every connection.

``serve_asgi(asgi_app, host, port, **bounds)`` and ``AsgiHost`` (``http.py``);
the bounds and their defaults (those of ``mrtr serve --http``): ``bounds.py``;
one connection's requests: ``connection.py``; a WebSocket on one: ``websocket.py``;
the ASGI shapes: ``asgi.py``; how it refuses: ``refusals.py``;
the ``lifespan`` protocol: ``lifespan.py``.
"""

from .asgi import ClientDisconnected
from .bounds import HostBounds, split_options
from .http import AsgiHost, serve_asgi
from .lifespan import LifespanFailure

__all__ = [
    "AsgiHost",
    "ClientDisconnected",
    "HostBounds",
    "LifespanFailure",
    "serve_asgi",
    "split_options",
]
