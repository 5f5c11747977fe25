"""The ASGI 3 shapes the host speaks: scopes, messages, the app, the error of a failed send."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["ASGI_VERSION", "AsgiApp", "ClientDisconnected", "Message", "Receive", "Scope", "Send"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: What each scope says of the server: ASGI 3, spec 2.4 (a failed send raises an OSError).
ASGI_VERSION = {"version": "3.0", "spec_version": "2.4"}


class ClientDisconnected(OSError):
    """A send failed: the client is gone, took nothing for ``write_timeout``, or the
    WebSocket is closed."""
