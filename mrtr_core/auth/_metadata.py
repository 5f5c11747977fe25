"""Where the authorization server is: protected-resource metadata (RFC 9728) and
authorization-server metadata (RFC 8414, OpenID Connect Discovery), as MCP uses them.

An MCP server (the resource) publishes a :class:`ResourceMetadata` document that
names its ``resource`` identifier and its ``authorization_servers``; a client finds
it from a 401's ``resource_metadata`` (``_challenge``), or at the well-known URLs
:func:`resource_metadata_urls` lists, in the order the specification says
(2026-07-28, "Authorization Server Discovery"): under the endpoint's path, then at
the root.  It then reads the authorization server's own metadata at the URLs
:func:`authorization_server_metadata_urls` lists, in the specification's order, and
must refuse a document whose ``issuer`` is not the issuer it asked about
(:meth:`AuthorizationServerMetadata.from_json`'s ``issuer``).

The readers are strict about what the rules need (types, required fields, the
identities that must match) and keep the other fields, as sent, in ``extra``: a
peer's document is bounded in size by whoever fetched it, and here only read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import attrs

from .._errors import INTERNAL_ERROR, LocalProtocolError, RemoteProtocolError, clip, describe

#: RFC 9728's well-known suffix, and RFC 8414's and OpenID Connect's.
RESOURCE_METADATA_SUFFIX: Final = "/.well-known/oauth-protected-resource"
OAUTH_METADATA_SUFFIX: Final = "/.well-known/oauth-authorization-server"
OPENID_METADATA_SUFFIX: Final = "/.well-known/openid-configuration"


class InvalidMetadata(RemoteProtocolError):
    """A metadata document that breaks its specification, or names another identity
    than the one it was fetched for (the client must not use it)."""

    code = INTERNAL_ERROR


def _url(value: Any, what: str) -> str:
    """An absolute http(s) URL without a fragment (``InvalidMetadata`` otherwise)."""
    if not isinstance(value, str):
        raise InvalidMetadata(f"{what} must be a URL string, not {describe(value)}")
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.netloc or parts.fragment:
        raise InvalidMetadata(f"{what} must be an absolute http(s) URL: {clip(value)!r}")
    return value


def _strings(value: Any, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidMetadata(f"{what} must be a list of strings")
    return tuple(value)


def _object(raw: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidMetadata(f"{what} must be a JSON object, not {describe(raw)}")
    return raw


@attrs.frozen(kw_only=True)
class ResourceMetadata:
    """An MCP server's protected-resource metadata (RFC 9728, section 2)."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None
    bearer_methods_supported: tuple[str, ...] | None = None
    resource_name: str | None = None
    resource_documentation: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def from_json(cls, raw: Any, *, resource: str | None = None) -> ResourceMetadata:
        """Read a server's document.  ``resource``: the resource the client meant (the
        MCP endpoint's URL, as :func:`canonical_resource` writes it); the document's
        must be the same, or it is refused (RFC 9728, section 3.3: else one server
        could send a client's token to another).  MCP requires at least one
        authorization server."""
        doc = _object(raw, "protected-resource metadata")
        named = _url(doc.get("resource"), "resource")
        if resource is not None and canonical_resource(named) != canonical_resource(resource):
            raise InvalidMetadata(
                f"the metadata is for the resource {clip(named)!r}, not {clip(resource)!r}"
            )
        servers = _strings(doc.get("authorization_servers"), "authorization_servers")
        if not servers:
            raise InvalidMetadata("authorization_servers must name at least one server")
        for server in servers:
            _url(server, "an authorization server")
        name = doc.get("resource_name")
        if name is not None and not isinstance(name, str):
            raise InvalidMetadata("resource_name must be a string")
        documentation = doc.get("resource_documentation")
        known = (
            "resource",
            "authorization_servers",
            "scopes_supported",
            "bearer_methods_supported",
            "resource_name",
            "resource_documentation",
        )
        return cls(
            resource=named,
            authorization_servers=servers,
            scopes_supported=_strings(doc.get("scopes_supported"), "scopes_supported"),
            bearer_methods_supported=_strings(
                doc.get("bearer_methods_supported"), "bearer_methods_supported"
            ),
            resource_name=name,
            resource_documentation=None
            if documentation is None
            else _url(documentation, "resource_documentation"),
            extra={k: v for k, v in doc.items() if k not in known},
        )

    def to_json(self) -> dict[str, Any]:
        """The document a server publishes."""
        out: dict[str, Any] = dict(self.extra)
        out["resource"] = self.resource
        out["authorization_servers"] = list(self.authorization_servers)
        for name in ("scopes_supported", "bearer_methods_supported"):
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value)
        for name in ("resource_name", "resource_documentation"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@attrs.frozen(kw_only=True)
class AuthorizationServerMetadata:
    """An authorization server's metadata (RFC 8414, section 2; OpenID Connect
    Discovery), the fields an MCP client uses named, the rest in ``extra``."""

    issuer: str
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    response_types_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def from_json(cls, raw: Any, *, issuer: str) -> AuthorizationServerMetadata:
        """Read a server's document, fetched for ``issuer``: its ``issuer`` must be
        identical (RFC 8414, section 3.3), or the client must not use it."""
        doc = _object(raw, "authorization-server metadata")
        named = _url(doc.get("issuer"), "issuer")
        if named != issuer:
            raise InvalidMetadata(
                f"the metadata's issuer {clip(named)!r} is not {clip(issuer)!r}, "
                "the one it was fetched for"
            )
        endpoints = {
            name: None if doc.get(name) is None else _url(doc[name], name)
            for name in ("authorization_endpoint", "token_endpoint", "registration_endpoint")
        }
        lists = {
            name: _strings(doc.get(name), name)
            for name in (
                "scopes_supported",
                "response_types_supported",
                "grant_types_supported",
                "code_challenge_methods_supported",
                "token_endpoint_auth_methods_supported",
            )
        }
        flags = {}
        for name in (
            "client_id_metadata_document_supported",
            "authorization_response_iss_parameter_supported",
        ):
            value = doc.get(name, False)
            if not isinstance(value, bool):
                raise InvalidMetadata(f"{name} must be a boolean")
            flags[name] = value
        fields: dict[str, Any] = {**endpoints, **lists, **flags}
        extra = {k: v for k, v in doc.items() if k != "issuer" and k not in fields}
        return cls(issuer=named, extra=extra, **fields)


def canonical_resource(url: str) -> str:
    """The resource identifier of an MCP endpoint's URL (RFC 8707; the specification's
    "Canonical Server URI"): scheme and host lower-cased, no fragment, no trailing
    slash on the path (none at all for the root)."""
    if not isinstance(url, str):
        raise LocalProtocolError(f"a resource URL is a str, not {describe(url)}")
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def resource_metadata_urls(endpoint: str) -> list[str]:
    """Where to look for the metadata of the MCP endpoint ``endpoint`` when no
    ``resource_metadata`` came with the 401, in order: under the endpoint's path,
    then at the root (the first alone when the endpoint is at the root)."""
    parts = urlsplit(endpoint)
    root = urlunsplit((parts.scheme, parts.netloc, RESOURCE_METADATA_SUFFIX, "", ""))
    path = parts.path.rstrip("/")
    if not path:
        return [root]
    return [urlunsplit((parts.scheme, parts.netloc, RESOURCE_METADATA_SUFFIX + path, "", "")), root]


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """Where to look for ``issuer``'s metadata, in the specification's order: with a
    path, RFC 8414 and OpenID path insertion, then OpenID path appending; without
    one, RFC 8414's then OpenID's."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(full_path: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, full_path, "", ""))

    if not path:
        return [at(OAUTH_METADATA_SUFFIX), at(OPENID_METADATA_SUFFIX)]
    return [
        at(OAUTH_METADATA_SUFFIX + path),
        at(OPENID_METADATA_SUFFIX + path),
        at(path + OPENID_METADATA_SUFFIX),
    ]


__all__ = [
    "AuthorizationServerMetadata",
    "InvalidMetadata",
    "ResourceMetadata",
    "authorization_server_metadata_urls",
    "canonical_resource",
    "resource_metadata_urls",
]
