"""The OAuth client's rules (2026-07-28, "Authorization"), sans-IO: what to fetch after
a 401, which resource metadata to accept, which scopes to ask for, how to register,
what the authorization request carries, what the redirect back must show (state;
RFC 9207's ``iss``), what the token request carries (PKCE, RFC 8707's ``resource``,
the client authentication the server takes) and what a token response means.

The transports do the I/O and make the inputs that must be random or timed (the
PKCE verifier, ``state``, the clock); every decision is here, once.  What a peer
sent that the client must not use is :class:`AuthorizationRefused` (or the
metadata readers' ``InvalidMetadata``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import attrs

from .._errors import INTERNAL_ERROR, LocalProtocolError, RemoteProtocolError, clip, describe
from ._challenge import BearerChallenge
from ._metadata import (
    AuthorizationServerMetadata,
    InvalidMetadata,
    ResourceMetadata,
    canonical_resource,
    resource_metadata_urls,
)

#: Authorizations one request may run (the first, after a 401, and step-ups after
#: 403 ``insufficient_scope``): a server that never grants what it asks for must not
#: loop a client (the specification's retry limit; the suite allows three).
MAX_AUTHORIZATIONS_PER_REQUEST: Final = 3
#: A token this close to its expiry is refreshed before use (clock skew, the trip).
EXPIRY_SKEW: Final = 30.0
OFFLINE_ACCESS: Final = "offline_access"
#: RFC 7636, section 4.1: 43 to 128 unreserved characters.
_VERIFIER_RE = re.compile(r"[A-Za-z0-9\-._~]{43,128}")
AuthMethod = Literal["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]
#: RFC 7523, section 2.2: a JWT that authenticates the client.
JWT_BEARER_ASSERTION: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: How long a client assertion is good for (seconds): one token request.
ASSERTION_LIFETIME: Final = 60
_SECRET_METHODS: Final = ("client_secret_basic", "client_secret_post")
RegistrationChoice = Literal["preregistered", "metadata_document", "dynamic"]


class AuthorizationRefused(RemoteProtocolError):
    """The authorization server's answer (the redirect back, a registration, a token
    response) that the client must not use: an error it reported, a ``state`` or
    ``iss`` that does not match, a malformed document."""

    code = INTERNAL_ERROR


# --- Discovery ---------------------------------------------------------------------------


def resource_endpoint(endpoint: str) -> str:
    """The URL an endpoint is protected as: its own, or for a WebSocket's
    (``ws://``, ``wss://``) the ``http(s)://`` URL of the same place (the upgrade is an
    HTTP request to it; a resource and its metadata are named by http(s) URLs)."""
    scheme, colon, rest = endpoint.partition(":")
    secure = {"ws": "http", "wss": "https"}.get(scheme.lower())
    return endpoint if secure is None or not colon else f"{secure}:{rest}"


def metadata_urls_after_401(challenge: BearerChallenge | None, endpoint: str) -> list[str]:
    """Where to fetch the resource's metadata after a 401 from ``endpoint``: the
    challenge's ``resource_metadata`` when it names one, else the well-known URLs in
    the specification's order."""
    if challenge is not None and challenge.resource_metadata:
        return [challenge.resource_metadata]
    return resource_metadata_urls(endpoint)


def read_resource_metadata(raw: Any, *, endpoint: str) -> ResourceMetadata:
    """The resource's metadata, refused (``InvalidMetadata``) unless its ``resource``
    is the endpoint or a parent of it on the same origin (RFC 9728, section 3.3 as
    MCP clients apply it: a server at ``/mcp`` may name its origin): a document naming
    another resource would have the client fetch a token for it."""
    metadata = ResourceMetadata.from_json(raw)
    named = urlsplit(canonical_resource(metadata.resource))
    wanted = urlsplit(canonical_resource(endpoint))
    prefix = named.path.rstrip("/") + "/"
    covered = (named.scheme, named.netloc) == (wanted.scheme, wanted.netloc) and (
        named.path == wanted.path or (wanted.path + "/").startswith(prefix)
    )
    if not covered or named.query:
        raise InvalidMetadata(
            f"the metadata is for the resource {clip(metadata.resource)!r}, not {clip(endpoint)!r}"
        )
    return metadata


# --- Scopes ------------------------------------------------------------------------------


def select_scopes(
    challenge: BearerChallenge | None,
    resource: ResourceMetadata,
    server: AuthorizationServerMetadata,
    *,
    previous: tuple[str, ...] = (),
    offline: bool = True,
) -> tuple[str, ...] | None:
    """The scopes to ask for: the challenge's ``scope``, else the resource metadata's
    ``scopes_supported``, else none (``None``: no ``scope`` parameter); on a step-up,
    with the ``previous`` ones kept (a re-authorization must not drop what was
    granted); ``offline_access`` added when ``offline`` and the authorization server
    lists it (and only then)."""
    if challenge is not None and challenge.scope:
        wanted = challenge.scope
    elif resource.scopes_supported:
        wanted = resource.scopes_supported
    else:
        wanted = ()
    scopes = list(dict.fromkeys((*previous, *wanted)))
    supported = server.scopes_supported or ()
    if offline and OFFLINE_ACCESS in supported and OFFLINE_ACCESS not in scopes:
        scopes.append(OFFLINE_ACCESS)
    return tuple(scopes) or None


def is_step_up(status: int, challenge: BearerChallenge | None) -> bool:
    """A 403 that a new authorization with more scopes may cure."""
    return status == 403 and challenge is not None and challenge.error == "insufficient_scope"


# --- Registration ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ClientCredentials:
    """Who the client is at one authorization server: its ``client_id``, its secret
    (never shown: ``repr`` leaves it out) and how it authenticates at the token
    endpoint (``None``: as the server's metadata allows)."""

    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=False)
    token_endpoint_auth_method: AuthMethod | None = None


def registration_choice(
    server: AuthorizationServerMetadata,
    *,
    preregistered: bool,
    metadata_document_url: str | None,
) -> RegistrationChoice:
    """How the client gets a ``client_id`` at ``server``: credentials registered
    beforehand, else its Client ID Metadata Document's URL when the server takes
    one, else dynamic registration (``AuthorizationRefused`` when the server has
    none of these for it)."""
    if preregistered:
        return "preregistered"
    if metadata_document_url is not None and server.client_id_metadata_document_supported:
        return "metadata_document"
    if server.registration_endpoint is None:
        raise AuthorizationRefused(
            f"{clip(server.issuer)!r} offers no dynamic registration and takes no client "
            "metadata document: the client needs pre-registered credentials for it"
        )
    return "dynamic"


def registration_request(
    server: AuthorizationServerMetadata, *, redirect_uris: list[str], client_name: str
) -> dict[str, Any]:
    """The dynamic registration request (RFC 7591): a native public client when the
    server takes one, asking for refresh tokens too."""
    supported = server.token_endpoint_auth_methods_supported
    method: AuthMethod = "none"
    if supported and "none" not in supported:
        method = next((m for m in _SECRET_METHODS if m in supported), "client_secret_basic")
    return {
        "client_name": client_name,
        "redirect_uris": list(redirect_uris),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "native",
    }


def read_registration(raw: Any) -> ClientCredentials:
    """The registration response's credentials (RFC 7591, section 3.2.1)."""
    if not isinstance(raw, Mapping):
        raise AuthorizationRefused(f"a registration response is an object, not {describe(raw)}")
    client_id = raw.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise AuthorizationRefused("the registration response has no client_id")
    secret = raw.get("client_secret")
    if secret is not None and not isinstance(secret, str):
        raise AuthorizationRefused("the registration response's client_secret is not a string")
    method = raw.get("token_endpoint_auth_method")
    if method is not None and method not in ("none", *_SECRET_METHODS):
        raise AuthorizationRefused(f"unsupported token_endpoint_auth_method {clip(method)!r}")
    return ClientCredentials(
        client_id=client_id, client_secret=secret or None, token_endpoint_auth_method=method
    )


def auth_method(server: AuthorizationServerMetadata, client: ClientCredentials) -> AuthMethod:
    """How ``client`` authenticates at ``server``'s token endpoint: as registered, else
    (with a secret) Basic when the server takes it, else POST; without one, none."""
    if client.token_endpoint_auth_method is not None:
        return client.token_endpoint_auth_method
    if client.client_secret is None:
        return "none"
    supported = server.token_endpoint_auth_methods_supported or ("client_secret_basic",)
    return next((m for m in _SECRET_METHODS if m in supported), "none")


# --- The authorization request and its answer --------------------------------------------


def pkce_challenge(verifier: str) -> str:
    """RFC 7636's S256 ``code_challenge`` of ``verifier`` (43 to 128 unreserved
    characters, made by the caller from a secure random source)."""
    if not isinstance(verifier, str) or not _VERIFIER_RE.fullmatch(verifier):
        raise LocalProtocolError("a PKCE verifier is 43 to 128 unreserved characters")
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorization_url(
    server: AuthorizationServerMetadata,
    *,
    client_id: str,
    redirect_uri: str,
    state: str,
    code_verifier: str,
    resource: str,
    scopes: tuple[str, ...] | None,
) -> str:
    """The URL the user agent opens: the authorization code request with PKCE (S256),
    ``state``, ``resource`` (as the resource's metadata published it) and the scopes."""
    if server.authorization_endpoint is None:
        raise AuthorizationRefused(f"{clip(server.issuer)!r} has no authorization_endpoint")
    methods = server.code_challenge_methods_supported
    if methods is not None and "S256" not in methods:
        raise AuthorizationRefused(f"{clip(server.issuer)!r} does not support PKCE with S256")
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": pkce_challenge(code_verifier),
        "code_challenge_method": "S256",
        "resource": resource,
    }
    if scopes:
        params["scope"] = " ".join(scopes)
    base = server.authorization_endpoint
    return base + ("&" if urlsplit(base).query else "?") + urlencode(params, quote_via=quote)


def read_callback(
    redirect: str, *, redirect_uri: str, state: str, server: AuthorizationServerMetadata
) -> str:
    """The authorization code in the redirect the user agent ended at, after the
    checks: the redirect URI the client registered, its ``state``, RFC 9207's ``iss``
    (when present it must be the issuer, compared as strings; when the server
    advertises it, it must be present), no ``error``."""
    parts, expected = urlsplit(redirect), urlsplit(redirect_uri)
    if (parts.scheme, parts.netloc, parts.path) != (
        expected.scheme,
        expected.netloc,
        expected.path,
    ):
        raise AuthorizationRefused("the authorization ended at another URI than the redirect URI")
    params: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in params:
            raise AuthorizationRefused(f"the redirect repeats {clip(name)!r}")
        params[name] = value
    iss = params.get("iss")
    if iss is not None and iss != server.issuer:
        raise AuthorizationRefused(
            f"the redirect's iss {clip(iss)!r} is not the issuer {clip(server.issuer)!r}"
        )
    if iss is None and server.authorization_response_iss_parameter_supported:
        raise AuthorizationRefused("the redirect has no iss, which the server advertises")
    if not hmac.compare_digest(params.get("state", "").encode(), state.encode()):
        raise AuthorizationRefused("the redirect's state is not the one the client sent")
    if "error" in params:
        description = params.get("error_description")
        detail = f": {clip(description)}" if description else ""
        raise AuthorizationRefused(f"authorization failed: {clip(params['error'])}{detail}")
    code = params.get("code")
    if not code:
        raise AuthorizationRefused("the redirect carries no authorization code")
    return code


# --- The token request and its answer ----------------------------------------------------


def client_assertion_claims(
    *, client_id: str, audience: str, now: float, jti: str
) -> dict[str, Any]:
    """The claims of a ``private_key_jwt`` client assertion (RFC 7523, section 3): the
    client is issuer and subject, the authorization server's issuer the audience;
    short-lived, unique (``jti``: random, from the caller).  The caller signs them."""
    issued = int(now)
    return {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": issued,
        "exp": issued + ASSERTION_LIFETIME,
        "jti": jti,
    }


def token_request(
    server: AuthorizationServerMetadata,
    client: ClientCredentials,
    grant: Mapping[str, str],
    *,
    assertion: str | None = None,
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The token request's extra headers and form for ``grant`` (see
    :func:`code_grant`, :func:`refresh_grant`), with the client's authentication
    (``assertion``: the signed :func:`client_assertion_claims`, for ``private_key_jwt``)."""
    method = auth_method(server, client)
    form = dict(grant)
    headers: list[tuple[str, str]] = []
    if method == "private_key_jwt":
        if assertion is None:
            raise LocalProtocolError("private_key_jwt needs the signed client assertion")
        form["client_assertion_type"] = JWT_BEARER_ASSERTION
        form["client_assertion"] = assertion
    elif method == "client_secret_basic" and client.client_secret is not None:
        # RFC 6749, section 2.3.1: each part form-encoded before Base64.
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers.append(("Authorization", "Basic " + base64.b64encode(pair.encode()).decode()))
    else:
        form["client_id"] = client.client_id
        if method == "client_secret_post" and client.client_secret is not None:
            form["client_secret"] = client.client_secret
    return headers, form


def code_grant(
    *, code: str, code_verifier: str, redirect_uri: str, resource: str
) -> dict[str, str]:
    """The authorization code grant's parameters (with PKCE and RFC 8707's resource)."""
    return {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": code_verifier,
        "redirect_uri": redirect_uri,
        "resource": resource,
    }


def refresh_grant(*, refresh_token: str, resource: str) -> dict[str, str]:
    """The refresh grant's parameters (the same resource; the scopes as granted)."""
    return {"grant_type": "refresh_token", "refresh_token": refresh_token, "resource": resource}


def client_credentials_grant(*, resource: str, scopes: tuple[str, ...] | None) -> dict[str, str]:
    """The client credentials grant's parameters (a machine client, no user: the MCP
    extension ``io.modelcontextprotocol/oauth-client-credentials``)."""
    grant = {"grant_type": "client_credentials", "resource": resource}
    if scopes:
        grant["scope"] = " ".join(scopes)
    return grant


@attrs.frozen(kw_only=True)
class Tokens:
    """What a token response granted; the tokens never shown (``repr`` leaves them out).
    ``expires_at``: on the caller's clock, ``None`` when the server did not say."""

    access_token: str = attrs.field(repr=False)
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: str | None = attrs.field(default=None, repr=False)
    scopes: tuple[str, ...] | None = None

    def usable(self, now: float) -> bool:
        """Not expired, nor about to be (``EXPIRY_SKEW``)."""
        return self.expires_at is None or now < self.expires_at - EXPIRY_SKEW

    @property
    def dpop_bound(self) -> bool:
        """Whether the token is bound to the client's DPoP key (RFC 9449)."""
        return self.token_type.lower() == "dpop"

    def header(self) -> tuple[str, str]:
        """The ``Authorization`` header that presents the access token (scheme
        ``DPoP`` for a DPoP-bound one, with a proof beside it)."""
        scheme = "DPoP" if self.dpop_bound else "Bearer"
        return ("Authorization", f"{scheme} {self.access_token}")


def read_token_response(
    status: int, raw: Any, *, now: float, previous: Tokens | None = None, dpop: bool = False
) -> Tokens:
    """The tokens of a token endpoint's answer (``status`` and its JSON body), or
    ``AuthorizationRefused`` with the server's ``error`` (RFC 6749, sections 5.1-5.2).
    A refresh answer without a new ``refresh_token`` keeps ``previous``'s.  ``dpop``:
    the request carried a DPoP proof, so a ``DPoP`` token is one too (RFC 9449, 5)."""
    if not isinstance(raw, Mapping):
        raise AuthorizationRefused(
            f"the token endpoint answered HTTP {status} with {describe(raw)}, not an object"
        )
    if status != 200 or "error" in raw:
        error = raw.get("error")
        description = raw.get("error_description")
        detail = f": {clip(description)}" if isinstance(description, str) else ""
        raise AuthorizationRefused(
            f"the token endpoint refused (HTTP {status}, {clip(error)}){detail}"
        )
    access = raw.get("access_token")
    if not isinstance(access, str) or not access or any(c in access for c in "\r\n "):
        raise AuthorizationRefused("the token response has no usable access_token")
    token_type = raw.get("token_type")
    accepted = ("bearer", "dpop") if dpop else ("bearer",)
    if not isinstance(token_type, str) or token_type.lower() not in accepted:
        raise AuthorizationRefused(f"unsupported token_type {clip(token_type)!r}")
    expires_in = raw.get("expires_in")
    if expires_in is not None and (
        isinstance(expires_in, bool) or not isinstance(expires_in, int) or expires_in < 0
    ):
        raise AuthorizationRefused("expires_in must be a non-negative integer")
    refresh = raw.get("refresh_token")
    if refresh is not None and (not isinstance(refresh, str) or not refresh):
        raise AuthorizationRefused("refresh_token must be a non-empty string")
    scope = raw.get("scope")
    if scope is not None and not isinstance(scope, str):
        raise AuthorizationRefused("scope must be a string")
    if refresh is None and previous is not None:
        refresh = previous.refresh_token
    return Tokens(
        access_token=access,
        token_type="DPoP" if token_type.lower() == "dpop" else "Bearer",
        expires_at=None if expires_in is None else now + expires_in,
        refresh_token=refresh,
        scopes=tuple(scope.split()) if scope is not None else None,
    )
