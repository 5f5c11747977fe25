"""Who may talk to the endpoint: ``Host`` and ``Origin`` allow-lists, trusted proxies.

The DNS-rebinding defence of Streamable HTTP.  By default only ``localhost``,
``127.0.0.1`` and ``[::1]`` on any port are allowed as ``Host`` and as the host
of an ``Origin`` (``http`` or ``https``); ``allowed_hosts`` adds names
(``name`` or ``name:port``), ``allowed_origins`` adds exact origins
(``scheme://host[:port]``), and ``"*"`` allows any.  A request without
``Origin`` is allowed; one with more than one ``Origin`` is not.
``X-Forwarded-Host`` is believed only from ``trusted_proxies`` (addresses or
networks).  A refusal is a 403 whose message names the setting to change.

The same trust says who a client is (``client_of``, for the per-client share
of listen streams): the peer's address, or, from a trusted proxy, the
nearest untrusted address of ``X-Forwarded-For``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from mrtr_core.http import header_fields

__all__ = ["LOCAL_HOSTS", "AccessPolicy", "Headers"]

#: Host names allowed by default (any port): the loopback names.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")


class Headers:
    """A request's header fields by lower-case name, each with its values in order."""

    def __init__(self, fields: Iterable[tuple[bytes, bytes]]) -> None:
        self.fields = header_fields(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in fields
        )

    def get_all(self, name: str) -> list[str]:
        return self.fields.get(name, [])

    def get(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[0] if values else None


def _split_host(host: str) -> tuple[str, str | None]:
    """``"name:port"`` or ``"[v6]:port"`` -> (lower-case name, port or None)."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return host, None
        name, rest = host[: end + 1], host[end + 1 :]
        return name, rest[1:] if rest.startswith(":") else None
    name, sep, port = host.partition(":")
    return name, port if sep else None


def _origin_of(value: str) -> tuple[str, str] | None:
    """An Origin value as (``scheme://host[:port]``, host name in URL form), or None."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    name = parts.hostname.lower()
    shown = f"[{name}]" if ":" in name else name
    origin = f"{parts.scheme.lower()}://{shown}" + (f":{port}" if port is not None else "")
    return origin, shown


class AccessPolicy:
    """Who may talk to the endpoint: Host and Origin allow-lists, trusted proxies."""

    def __init__(
        self,
        allowed_hosts: Iterable[str] | None,
        allowed_origins: Iterable[str] | None,
        trusted_proxies: Iterable[str],
    ) -> None:
        # Entries are added to the loopback defaults; "*" allows any.
        self.hosts = {h.strip().lower() for h in (*LOCAL_HOSTS, *(allowed_hosts or ()))}
        origins = set()
        for entry in allowed_origins or ():
            parsed = _origin_of(entry)
            origins.add("*" if entry.strip() == "*" else parsed[0] if parsed else entry.lower())
        self.origins = origins
        self.proxies = [ipaddress.ip_network(p, strict=False) for p in trusted_proxies]

    def refusal(self, headers: Headers, peer: str | None) -> str | None:
        """Why this request is refused (the 403 message), or None.

        (More than one ``Host`` never gets here: h11, or the endpoint, refuses it with a 400.)
        """
        host = headers.get("host")
        forwarded = headers.get("x-forwarded-host")
        if forwarded is not None and self._trusted(peer):
            host = forwarded.split(",")[0]
        if host is not None and not self._host_allowed(host):
            return (
                f"Host {host.strip()!r} is not allowed: add it to allowed_hosts "
                "(mrtr serve --allow-host)"
            )
        origins = headers.get_all("origin")
        if len(origins) > 1:  # which one would the browser have meant? Neither is believed.
            shown = ", ".join(repr(o.strip()) for o in origins)
            return f"more than one Origin header ({shown}): a request has one origin"
        origin = origins[0] if origins else None
        if origin is not None and not self._origin_allowed(origin):
            return (
                f"Origin {origin.strip()!r} is not allowed: add it to allowed_origins "
                "(mrtr serve --allow-origin)"
            )
        return None

    def client_of(self, headers: Headers, peer: str | None) -> str:
        """Who sent this request: the peer address; behind ``trusted_proxies``, the
        last ``X-Forwarded-For`` hop that is not one of them (each proxy appends)."""
        client = peer or "unknown"
        if self._trusted(peer):
            hops = [h.strip() for v in headers.get_all("x-forwarded-for") for h in v.split(",")]
            for hop in reversed(hops):
                if not hop:
                    break  # a malformed list: believe no further
                client = hop
                if not self._trusted(hop):
                    break
        return client

    def _trusted(self, peer: str | None) -> bool:
        if peer is None or not self.proxies:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.proxies)

    def _host_allowed(self, host: str) -> bool:
        if "*" in self.hosts:
            return True
        name, port = _split_host(host)
        return name in self.hosts or (port is not None and f"{name}:{port}" in self.hosts)

    def _origin_allowed(self, value: str) -> bool:
        if "*" in self.origins:
            return True
        parsed = _origin_of(value)
        if parsed is None:
            return False  # "null" (a sandboxed page, a file://) and garbage
        origin, name = parsed
        if origin in self.origins:
            return True
        return name in LOCAL_HOSTS and origin.split("://", 1)[0] in ("http", "https")
