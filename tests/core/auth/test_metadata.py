"""Protected-resource metadata (RFC 9728) and authorization-server metadata (RFC 8414):
strict readers, the identities that must match, and the well-known URLs in the
specification's order."""

from __future__ import annotations

import re
from typing import Any

import pytest

import mrtr_core as m
from mrtr_core.auth import (
    AuthorizationServerMetadata,
    InvalidMetadata,
    ResourceMetadata,
    authorization_server_metadata_urls,
    canonical_resource,
    resource_metadata_urls,
)

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"
PRM: dict[str, Any] = {
    "resource": RESOURCE,
    "authorization_servers": [ISSUER],
    "scopes_supported": ["files:read", "files:write"],
    "bearer_methods_supported": ["header"],
    "resource_name": "Files",
    "resource_documentation": "https://mcp.example.com/docs",
    "x-vendor": {"kept": True},
}
ASM: dict[str, Any] = {
    "issuer": ISSUER,
    "authorization_endpoint": f"{ISSUER}/authorize",
    "token_endpoint": f"{ISSUER}/token",
    "registration_endpoint": f"{ISSUER}/register",
    "scopes_supported": ["files:read"],
    "response_types_supported": ["code"],
    "grant_types_supported": ["authorization_code", "refresh_token"],
    "code_challenge_methods_supported": ["S256"],
    "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
    "client_id_metadata_document_supported": True,
    "authorization_response_iss_parameter_supported": True,
    "jwks_uri": f"{ISSUER}/jwks",
}


def test_a_resource_metadata_document_is_read_and_written_back() -> None:
    doc = ResourceMetadata.from_json(PRM, resource=RESOURCE + "/")
    assert doc.authorization_servers == (ISSUER,)
    assert doc.scopes_supported == ("files:read", "files:write")
    assert doc.extra == {"x-vendor": {"kept": True}}
    assert doc.to_json() == PRM
    minimal = ResourceMetadata(resource=RESOURCE, authorization_servers=(ISSUER,))
    assert minimal.to_json() == {"resource": RESOURCE, "authorization_servers": [ISSUER]}
    assert ResourceMetadata.from_json(minimal.to_json()) == minimal


def test_metadata_for_another_resource_is_refused() -> None:
    # RFC 9728 section 3.3: else one server could have a client send it another's token.
    other = re.escape("not 'https://mcp.example.com/other'")
    with pytest.raises(InvalidMetadata, match=other) as refused:
        ResourceMetadata.from_json(PRM, resource="https://mcp.example.com/other")
    assert isinstance(refused.value, m.RemoteProtocolError)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"resource": None}, "resource must be a URL string"),
        ({"resource": "mcp.example.com/mcp"}, "absolute http"),
        ({"resource": "https://mcp.example.com/mcp#x"}, "absolute http"),
        ({"authorization_servers": []}, "at least one"),
        ({"authorization_servers": None}, "at least one"),
        ({"authorization_servers": ISSUER}, "list of strings"),
        ({"authorization_servers": ["ftp://x"]}, "authorization server"),
        ({"scopes_supported": [1]}, "list of strings"),
        ({"resource_name": 7}, "resource_name"),
        ({"resource_documentation": "docs"}, "resource_documentation"),
    ],
)
def test_a_broken_resource_metadata_document_is_refused(change: dict[str, Any], said: str) -> None:
    with pytest.raises(InvalidMetadata, match=said):
        ResourceMetadata.from_json({**PRM, **change})


def test_documents_that_are_not_objects_are_refused() -> None:
    with pytest.raises(InvalidMetadata, match="JSON object"):
        ResourceMetadata.from_json([PRM])
    with pytest.raises(InvalidMetadata, match="JSON object"):
        AuthorizationServerMetadata.from_json("x", issuer=ISSUER)


def test_an_authorization_server_document_is_read() -> None:
    doc = AuthorizationServerMetadata.from_json(ASM, issuer=ISSUER)
    assert doc.token_endpoint == f"{ISSUER}/token"
    assert doc.code_challenge_methods_supported == ("S256",)
    assert doc.client_id_metadata_document_supported is True
    assert doc.authorization_response_iss_parameter_supported is True
    assert doc.extra == {"jwks_uri": f"{ISSUER}/jwks"}
    bare = AuthorizationServerMetadata.from_json({"issuer": ISSUER}, issuer=ISSUER)
    assert bare.token_endpoint is None and bare.client_id_metadata_document_supported is False


def test_an_authorization_server_document_for_another_issuer_is_refused() -> None:
    # The specification's own example: fetched from the attacker, naming the honest one.
    forged = {**ASM, "issuer": "https://honest.example"}
    with pytest.raises(InvalidMetadata, match=re.escape("is not 'https://attacker.example'")):
        AuthorizationServerMetadata.from_json(forged, issuer="https://attacker.example")
    # Identical means identical: a trailing slash is another issuer.
    with pytest.raises(InvalidMetadata):
        AuthorizationServerMetadata.from_json(ASM, issuer=ISSUER + "/")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"token_endpoint": "/token"}, "token_endpoint"),
        ({"code_challenge_methods_supported": "S256"}, "list of strings"),
        ({"client_id_metadata_document_supported": "yes"}, "boolean"),
    ],
)
def test_a_broken_authorization_server_document_is_refused(
    change: dict[str, Any], said: str
) -> None:
    with pytest.raises(InvalidMetadata, match=said):
        AuthorizationServerMetadata.from_json({**ASM, **change}, issuer=ISSUER)


def test_the_well_known_urls_are_tried_in_the_specifications_order() -> None:
    assert resource_metadata_urls("https://example.com/public/mcp") == [
        "https://example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]
    assert resource_metadata_urls("https://example.com/") == [
        "https://example.com/.well-known/oauth-protected-resource"
    ]
    assert authorization_server_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert authorization_server_metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def test_the_canonical_resource_of_an_endpoint() -> None:
    assert canonical_resource("HTTPS://MCP.Example.com/mcp/#frag") == RESOURCE
    assert canonical_resource("https://mcp.example.com/") == "https://mcp.example.com"
    assert canonical_resource("https://mcp.example.com/mcp?x=1") == RESOURCE + "?x=1"
    with pytest.raises(m.LocalProtocolError):
        canonical_resource(None)  # type: ignore[arg-type]
