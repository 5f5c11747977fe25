"""Where the HTTP client's requests go, and what every one of them carries.

:class:`Endpoint` is read from the URL once (``HttpLink`` makes it): the
``Host`` (authority) and request target, the caller's extra headers, how long a
new connection may take.  It is all the 2025 session
(:mod:`~mrtr_transports.client.http_sessions`) knows of the link's address.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Endpoint"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An ``http(s)`` endpoint, parsed (see the module docstring)."""

    url: str
    https: bool
    host: str
    port: int
    #: The ``Host`` header (the URL's netloc without credentials).
    authority: str
    #: The request target: path and query.
    target: str
    #: Headers every request carries (e.g. ``Authorization``), in order.
    extra_headers: tuple[tuple[str, str], ...]
    #: Seconds a new connection may take (and the bound on a session's DELETE).
    connect_timeout: float

    @classmethod
    def parse(
        cls,
        url: str,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        connect_timeout: float = 10.0,
    ) -> Endpoint:
        """``ValueError`` when ``url`` is not an ``http(s)`` URL with a host."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        https = parts.scheme == "https"
        items = headers.items() if isinstance(headers, Mapping) else (headers or ())
        return cls(
            url=url,
            https=https,
            host=parts.hostname,
            port=parts.port or (443 if https else 80),
            authority=parts.netloc.rpartition("@")[2],
            target=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
            extra_headers=tuple((str(k), str(v)) for k, v in items),
            connect_timeout=connect_timeout,
        )
