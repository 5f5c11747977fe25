"""The OAuth client the HTTP link uses: it presents a token on every request, and
when the server answers 401 (or 403 ``insufficient_scope``) it runs the flow the
specification describes, then has the request sent again.

The flow, one step per method, each decision taken by ``mrtr_core.auth._client``:
discovery (the challenge's ``resource_metadata`` or the well-known URLs; the
resource's metadata must cover the endpoint, the authorization server's must name
the issuer it was fetched for), registration (pre-registered credentials, a Client
ID Metadata Document, or dynamic registration; kept per authorization server),
authorization (PKCE S256, ``state``, ``resource``, the selected scopes, through the
pluggable :data:`~.user_agent.UserAgent`; the redirect checked, ``iss`` included),
the token request (with the client authentication the server takes), and refresh
before a token expires.  Tokens live in a :class:`~.store.TokenStore` under the
resource and the issuer; they are never logged, traced or quoted in an error.  A
DPoP-bound token is saved with its key and read back with it: the provider proves
and refreshes with the key its stored token is bound to (an earlier process's), and
a bound token whose key the store cannot give back counts as no token (a new
authorization, never the token sent as Bearer).
"""

from __future__ import annotations

import logging
import secrets
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import attrs

from mrtr_core import MrtrError
from mrtr_core.auth import (
    AuthorizationServerMetadata,
    BearerChallenge,
    ResourceMetadata,
    _dpop,
    authorization_server_metadata_urls,
)
from mrtr_core.auth import _client as rules
from mrtr_core.auth import _grants as grants

from ..errors import AuthorizationFailed
from ..person_time import PersonTime
from .assertion import sign_client_assertion
from .dpop import ALGORITHMS as DPOP_ALGORITHMS
from .dpop import DpopKey
from .fetch import Fetched, FetchFailed, fetch, read_json, shown_url
from .grants import AssertionSource
from .store import MemoryTokenStore, TokenStore
from .user_agent import UserAgent

__all__ = ["OAuthProvider"]

logger = logging.getLogger("mrtr.client.oauth")


class _Discovered:
    """What discovery found for the endpoint: the resource and its authorization server."""

    def __init__(self, resource: ResourceMetadata, server: AuthorizationServerMetadata) -> None:
        self.resource = resource
        self.server = server


class OAuthProvider:
    """OAuth for one MCP endpoint (see the module docstring).

    ``redirect_uri``: where the authorization server sends the user agent back (the
    loopback URL ``mrtr call`` listens on; any registered URI for a headless agent).
    ``client_id``/``client_secret``: pre-registered credentials (used at any issuer;
    ``issuer`` limits them to one).  ``client_metadata_url``: the client's Client ID
    Metadata Document, used where the server takes one.  ``offline``: ask for
    ``offline_access`` where the server offers it (a refresh token).
    ``client_credentials``: a machine client (the client credentials extension): the
    pre-registered credentials get the token, no user agent is involved; with
    ``private_key_pem`` (and ``signing_algorithm``) it authenticates by a signed JWT
    (``private_key_jwt``) instead of a secret.  ``dpop``: ask for DPoP-bound tokens
    (RFC 9449) where the authorization server offers them, and prove the key on each
    request (``proof_headers``; a server's nonce honoured); a bound token is saved
    with its key, and a stored one is proven and refreshed with the key stored with
    it.  ``jwt_bearer``: get tokens by the JWT-bearer grant with the JWT this source
    gives (``grants``: a workload's identity, an enterprise ID-JAG), no user agent
    involved; its refusal is final.  ``clock``: the tokens' clock (wall time: a store
    outlives the process).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        user_agent: UserAgent,
        redirect_uri: str,
        store: TokenStore | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        issuer: str | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "mrtr",
        offline: bool = True,
        client_credentials: bool = False,
        private_key_pem: str | None = None,
        signing_algorithm: str = "ES256",
        dpop: bool = False,
        jwt_bearer: AssertionSource | None = None,
        clock: Callable[[], float] = time.time,
        timeout: float = 10.0,
        max_bytes: int = 256 * 1024,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.endpoint = endpoint
        #: What discovery matches the resource's metadata against (a WebSocket's
        #: ``ws://`` endpoint is protected as its ``http://`` URL).
        self._resource_endpoint = rules.resource_endpoint(endpoint)
        self.user_agent = user_agent
        #: The person's time at the user agent, which the client's timers do not count.
        self.person_time = PersonTime()
        self.redirect_uri = redirect_uri
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self._preregistered = (
            None
            if client_id is None
            else rules.ClientCredentials(
                client_id=client_id,
                client_secret=client_secret,
                token_endpoint_auth_method=None if private_key_pem is None else "private_key_jwt",
            )
        )
        self._private_key_pem = private_key_pem
        self._signing_algorithm = signing_algorithm
        self._preregistered_issuer = issuer
        self.client_metadata_url = client_metadata_url
        self.client_name = client_name
        self.offline = offline
        if client_credentials and (client_id is None or (client_secret or private_key_pem) is None):
            raise ValueError(
                "client_credentials=True needs client_id and client_secret (or private_key_pem)"
            )
        self.client_credentials = client_credentials
        self._jwt_bearer = jwt_bearer
        #: The DPoP key (RFC 9449) when ``dpop``: tokens bound to it where the
        #: authorization server takes DPoP proofs, each request with a proof.
        #: A stored bound token's key replaces it when the token is read (``_stored``).
        self._dpop_key = DpopKey() if dpop else None
        #: The nonce each server asked proofs to carry (the authorization server's
        #: by issuer; the resource's): the last one it sent.
        self._issuer_nonces: dict[str, str] = {}
        self._resource_nonce: str | None = None
        self.clock = clock
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._ssl_context = ssl_context
        self._lock = anyio.Lock()
        self._found: _Discovered | None = None
        self._scopes: tuple[str, ...] = ()
        #: The header of a token refreshed because its predecessor got a 401: if it gets
        #: one too, the next step is a new authorization, not another refresh.
        self._refreshed_after_401: tuple[str, str] | None = None
        #: How many authorizations ran (the tests' and the suite's measure).
        self.authorizations = 0

    def __repr__(self) -> str:
        return f"OAuthProvider({shown_url(self.endpoint)!r})"

    # --- What the link calls --------------------------------------------------------

    async def authorization(self) -> tuple[str, str] | None:
        """The ``Authorization`` header for the next request (a token refreshed first
        when it is about to expire), or ``None`` before any token."""
        found = self._found
        if found is None:
            return None
        key = (found.resource.resource, found.server.issuer)
        tokens = await self._stored(*key)
        if tokens is None:
            return None
        if not tokens.usable(self.clock()):
            async with self._lock:
                tokens = await self._stored(*key)
                if tokens is not None and not tokens.usable(self.clock()):
                    tokens = await self._refresh(found, tokens)
            if tokens is None:
                return None
        return tokens.header()

    def proof_headers(self, method: str, url: str, sent: tuple[str, str]) -> list[tuple[str, str]]:
        """The ``DPoP`` proof to send beside ``sent`` to ``method`` ``url``, for a
        DPoP-bound token (none for a Bearer one)."""
        key = self._dpop_key
        scheme, _, token = sent[1].partition(" ")
        if key is None or scheme != _dpop.SCHEME:
            return []
        nonce = self._resource_nonce
        proof = key.proof(method, url, now=self.clock(), nonce=nonce, access_token=token)
        return [("DPoP", proof)]

    async def challenged(
        self,
        status: int,
        www_authenticate: Sequence[str],
        sent: tuple[str, str] | None,
        *,
        dpop_nonce: str | None = None,
    ) -> bool:
        """The server refused a request that carried ``sent`` (``None``: no token) with
        ``status`` and these ``WWW-Authenticate`` values: get a (better) token, or the
        nonce its DPoP proofs must carry (``dpop_nonce``, the ``DPoP-Nonce`` header),
        and return True to send it again, or False when nothing would help (a 403 that
        is not ``insufficient_scope``).  ``AuthorizationFailed`` when the flow fails."""
        try:
            values = list(www_authenticate)
            challenge = BearerChallenge.from_headers(values)
            dpop = BearerChallenge.from_headers(values, scheme=_dpop.SCHEME)
        except MrtrError as exc:
            why = f"the server's challenge is malformed: {exc.message}"
            raise self._failed(status, why) from None
        if sent is not None and sent[1].startswith(f"{_dpop.SCHEME} "):
            nonce = _dpop.requested_nonce(status, dpop_nonce, challenge=dpop)
            if nonce is not None and nonce != self._resource_nonce:
                self._resource_nonce = nonce
                return True  # the same token, its proof with the server's nonce
        challenge = challenge or dpop  # (a DPoP challenge names the metadata too)
        step_up = rules.is_step_up(status, challenge)
        if status != 401 and not step_up:
            return False
        async with self._lock:
            current = await self._current_header()
            if current is not None and current != sent:
                return True  # another request got a new token meanwhile: try that one
            try:
                await self._authorize(status, challenge, sent, step_up=step_up)
            except (MrtrError, FetchFailed) as exc:
                message = exc.message if isinstance(exc, MrtrError) else str(exc)
                raise self._failed(status, message) from None
        return True

    # --- The flow ---------------------------------------------------------------------

    async def _fetch(self, url: str, **options: Any) -> Fetched:
        """A bounded fetch (``fetch``) with this provider's bounds."""
        return await fetch(
            url,
            timeout=self._timeout,
            max_bytes=self._max_bytes,
            ssl_context=self._ssl_context,
            **options,
        )

    async def _current_header(self) -> tuple[str, str] | None:
        found = self._found
        if found is None:
            return None
        tokens = await self._stored(found.resource.resource, found.server.issuer)
        return None if tokens is None else tokens.header()

    async def _stored(self, resource: str, issuer: str) -> rules.Tokens | None:
        """The stored tokens, a DPoP-bound one only with its key (then the key the
        provider proves with); a bound token without a readable key is no token."""
        tokens = await self.store.tokens(resource, issuer)
        if tokens is None or not tokens.dpop_bound:
            return tokens
        key = await self.store.dpop_key(resource, issuer)
        if key is None:
            logger.info("a stored DPoP-bound token has no usable key: authorizing again")
            return None
        self._dpop_key = key
        return tokens

    async def _save(self, resource: str, issuer: str, tokens: rules.Tokens | None) -> None:
        """Save ``tokens``, a DPoP-bound one with the key it is bound to."""
        if tokens is not None and tokens.dpop_bound:
            await self.store.save_tokens(resource, issuer, tokens, dpop_key=self._dpop_key)
        else:
            await self.store.save_tokens(resource, issuer, tokens)

    def _failed(self, status: int, why: str) -> AuthorizationFailed:
        return AuthorizationFailed(
            f"authorization for {shown_url(self.endpoint)} failed: {why}",
            kind="http",
            status=status,
        )

    async def _authorize(
        self,
        status: int,
        challenge: BearerChallenge | None,
        sent: tuple[str, str] | None,
        *,
        step_up: bool,
    ) -> None:
        previous = self._found
        found = await self._discover(challenge)
        self._found = found
        resource, issuer = found.resource.resource, found.server.issuer
        same = previous is not None and previous.server.issuer == issuer
        tokens = await self._stored(resource, issuer)
        if tokens is not None and not step_up:
            if tokens.header() != sent and tokens.usable(self.clock()):
                return  # a stored token this request did not carry (an earlier run's)
            # The token was refused, or expired before a new process sent it (``sent``
            # None): a refreshed one may not be, unless it was one itself.
            refused_refreshed = sent is not None and sent == self._refreshed_after_401
            if tokens.refresh_token is not None and not refused_refreshed:
                fresh = await self._refresh(found, tokens)
                if fresh is not None:
                    self._refreshed_after_401 = fresh.header()
                    return
        # A step-up keeps what was granted: this process's requests, and the stored
        # token's scopes (an earlier process's grant: the store outlives the process).
        earlier: tuple[str, ...] = ()
        if step_up:
            stored = tokens.scopes if tokens is not None and tokens.scopes else ()
            earlier = (*(self._scopes if same else ()), *stored)
        await self._save(resource, issuer, None)
        client = await self._client_for(found.server)
        scopes = rules.select_scopes(
            challenge, found.resource, found.server, previous=earlier, offline=self.offline
        )
        self._scopes = scopes or ()
        if self._jwt_bearer is not None:
            assertion = await self._jwt_bearer(found.server, resource, scopes)
            grant = grants.jwt_bearer_grant(assertion=assertion, resource=resource, scopes=scopes)
            self.authorizations += 1
            tokens = await self._token_request(found.server, client, grant, None)
            await self._save(resource, issuer, _granted(tokens, scopes))
            return
        if self.client_credentials:
            grant = rules.client_credentials_grant(resource=resource, scopes=scopes)
            self.authorizations += 1
            tokens = await self._token_request(found.server, client, grant, None)
            await self._save(resource, issuer, _granted(tokens, scopes))
            return
        verifier = secrets.token_urlsafe(64)  # 86 characters: RFC 7636's 43 to 128
        state = secrets.token_urlsafe(24)
        url = rules.authorization_url(
            found.server,
            client_id=client.client_id,
            redirect_uri=self.redirect_uri,
            state=state,
            code_verifier=verifier,
            resource=resource,
            scopes=scopes,
        )
        self.authorizations += 1
        logger.info("authorizing at %s", shown_url(issuer))
        with self.person_time.at_work():
            redirect = await self.user_agent(url)
        code = rules.read_callback(
            redirect, redirect_uri=self.redirect_uri, state=state, server=found.server
        )
        grant = rules.code_grant(
            code=code, code_verifier=verifier, redirect_uri=self.redirect_uri, resource=resource
        )
        tokens = await self._token_request(found.server, client, grant, None)
        await self._save(resource, issuer, _granted(tokens, scopes))

    async def _discover(self, challenge: BearerChallenge | None) -> _Discovered:
        resource: ResourceMetadata | None = None
        tried: list[str] = []
        for url in rules.metadata_urls_after_401(challenge, self._resource_endpoint):
            fetched = await self._fetch(url)
            tried.append(shown_url(url))
            if fetched.status == 200:
                resource = rules.read_resource_metadata(
                    read_json(fetched, url), endpoint=self._resource_endpoint
                )
                break
        if resource is None:
            raise FetchFailed(f"no protected-resource metadata at {', '.join(tried)}", kind="http")
        issuer = resource.authorization_servers[0]
        server: AuthorizationServerMetadata | None = None
        for url in authorization_server_metadata_urls(issuer):
            fetched = await self._fetch(url)
            if fetched.status == 200:
                server = AuthorizationServerMetadata.from_json(
                    read_json(fetched, url), issuer=issuer
                )
                break
        if server is None:
            raise FetchFailed(
                f"no authorization-server metadata for {shown_url(issuer)}", kind="http"
            )
        return _Discovered(resource, server)

    async def _client_for(self, server: AuthorizationServerMetadata) -> rules.ClientCredentials:
        issuer = server.issuer
        preregistered = self._preregistered is not None and self._preregistered_issuer in (
            None,
            issuer,
        )
        choice = rules.registration_choice(
            server, preregistered=preregistered, metadata_document_url=self.client_metadata_url
        )
        if choice == "preregistered":
            assert self._preregistered is not None
            return self._preregistered
        if choice == "metadata_document":
            assert self.client_metadata_url is not None
            return rules.ClientCredentials(client_id=self.client_metadata_url)
        known = await self.store.client(issuer)
        if known is not None:
            return known
        assert server.registration_endpoint is not None
        body = rules.registration_request(
            server, redirect_uris=[self.redirect_uri], client_name=self.client_name
        )
        fetched = await self._fetch(server.registration_endpoint, method="POST", json_body=body)
        if fetched.status not in (200, 201):
            raise rules.AuthorizationRefused(f"dynamic registration answered HTTP {fetched.status}")
        client = rules.read_registration(read_json(fetched, server.registration_endpoint))
        await self.store.save_client(issuer, client)
        return client

    async def _token_request(
        self,
        server: AuthorizationServerMetadata,
        client: rules.ClientCredentials,
        grant: dict[str, str],
        previous: rules.Tokens | None,
    ) -> rules.Tokens:
        if server.token_endpoint is None:
            raise rules.AuthorizationRefused(f"{shown_url(server.issuer)} has no token_endpoint")
        endpoint = server.token_endpoint
        key = self._dpop_key
        dpop = key is not None and _dpop.signing_algorithm(server, DPOP_ALGORITHMS) is not None
        for _ in range(2):  # (a second time with the nonce a use_dpop_nonce answer named)
            # Each try its own client assertion (a ``jti`` is used once) and proof.
            assertion = self._client_assertion(server, client)
            headers, form = rules.token_request(server, client, grant, assertion=assertion)
            if dpop:
                assert key is not None
                nonce = self._issuer_nonces.get(server.issuer)
                proof = key.proof("POST", endpoint, now=self.clock(), nonce=nonce)
                headers.append(("DPoP", proof))
            fetched = await self._fetch(endpoint, method="POST", form=form, headers=headers)
            answer = read_json(fetched, endpoint)
            error = answer.get("error") if isinstance(answer, dict) else None
            nonce = _dpop.requested_nonce(fetched.status, fetched.header("dpop-nonce"), error=error)
            if not dpop or nonce is None or nonce == self._issuer_nonces.get(server.issuer):
                break
            self._issuer_nonces[server.issuer] = nonce
        return rules.read_token_response(
            fetched.status, answer, now=self.clock(), previous=previous, dpop=dpop
        )

    def _client_assertion(
        self, server: AuthorizationServerMetadata, client: rules.ClientCredentials
    ) -> str | None:
        """The signed ``private_key_jwt`` assertion, where the client authenticates so."""
        if rules.auth_method(server, client) != "private_key_jwt":
            return None
        if self._private_key_pem is None:
            raise rules.AuthorizationRefused("private_key_jwt needs the client's private key")
        claims = rules.client_assertion_claims(
            client_id=client.client_id,
            audience=server.issuer,
            now=self.clock(),
            jti=secrets.token_urlsafe(16),
        )
        try:
            return sign_client_assertion(claims, self._private_key_pem, self._signing_algorithm)
        except ValueError as exc:  # (its message may quote the key: not shown)
            raise rules.AuthorizationRefused(
                f"the client assertion could not be signed ({type(exc).__name__})"
            ) from None

    async def _refresh(self, found: _Discovered, tokens: rules.Tokens) -> rules.Tokens | None:
        """New tokens by ``tokens``' refresh token (saved), or None (the old ones dropped)."""
        resource, issuer = found.resource.resource, found.server.issuer
        fresh: rules.Tokens | None = None
        if tokens.refresh_token:
            grant = rules.refresh_grant(refresh_token=tokens.refresh_token, resource=resource)
            try:
                client = await self._client_for(found.server)
                fresh = _granted(
                    await self._token_request(found.server, client, grant, tokens), tokens.scopes
                )
            except (MrtrError, FetchFailed) as exc:
                logger.info("refresh at %s failed: %s", shown_url(issuer), exc)
        await self._save(resource, issuer, fresh)
        return fresh


def _granted(tokens: rules.Tokens, requested: tuple[str, ...] | None) -> rules.Tokens:
    """``tokens`` with the scopes they were granted: a response that names none granted
    those requested (RFC 6749, 5.1; a refresh, those of the token it replaces: 6), kept
    with the token so a later process's step-up keeps them."""
    if tokens.scopes is not None or not requested:
        return tokens
    return attrs.evolve(tokens, scopes=requested)
