"""A real OpenID provider for the auth tests, and a test browser that logs in to it.

``oidc_provider()`` runs ``tests/support/oidc/provider.mjs`` (the ``oidc-provider`` package,
pinned in ``tests/support/oidc/package.json``, installed by ``scripts/install_node_peers.py``)
under the venv's Node as a real subprocess on 127.0.0.1, waits for its ``ISSUER ...`` line and
yields an ``OidcProvider``: its issuer, its discovery document, the users and clients it knows.
The process is stopped (SIGTERM, then SIGKILL) when the block ends.  Its configuration goes
in a file only the owner can read, never on the command line (it holds the client secrets).

``TestBrowser.authorize(url, user="ada")`` does what a person's browser does: it follows the
authorization URL, signs in on the provider's login form, allows (or denies) on its consent
form, follows the provider's redirects, and stops at the first redirect that leaves the
provider: the authorization response to the client's ``redirect_uri``, returned unvisited (the
client under test receives it).  A browser keeps its cookies (the provider's session) from
one call to the next, as a real one does; ``provider.browser()`` is a new one.

HTTP is the standard library's (``urllib.request``, ``http.cookiejar``) run on a worker
thread, so the helpers work on trio and asyncio alike; httpx is not a dependency of the
project.  Works on both loops: nothing here is loop-specific beyond ``anyio``.
"""

from __future__ import annotations

import base64
import hashlib
import http.cookiejar
import json
import os
import secrets
import tempfile
import urllib.request
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import anyio
import attrs

from support.conformance_suite import NODE, ROOT

PROJECT = ROOT / "tests" / "support" / "oidc"
PROVIDER_JS = PROJECT / "provider.mjs"

#: The resource servers tokens are issued for: any MCP endpoint on 127.0.0.1 (the port is
#: the server's, chosen after the provider started), with the scopes its tools ask for.
DEFAULT_RESOURCE = "http://127.0.0.1:*/mcp"
DEFAULT_RESOURCE_SCOPES = ("tools:read", "tools:deploy")
#: A public client (PKCE, no secret; ``native``, so any loopback port, RFC 8252 section 7.3)
PUBLIC_CLIENT_ID = "mcp-public"
#: A confidential client (client_secret_basic; client_secret_post is the other one)
CONFIDENTIAL_CLIENT_ID = "mcp-confidential"
CONFIDENTIAL_POST_CLIENT_ID = "mcp-confidential-post"
#: A resource server's own credentials (client_secret_basic), for the introspection endpoint
RESOURCE_SERVER_CLIENT_ID = "mcp-resource-server"
LOOPBACK_REDIRECT_URI = "http://127.0.0.1/callback"

_STARTUP_SECONDS = 30.0
_HTTP_SECONDS = 10.0
_BROWSER_STEPS = 12


@attrs.frozen
class User:
    password: str
    claims: Mapping[str, Any] = attrs.field(factory=dict)


DEFAULT_USERS: Mapping[str, User] = {
    "ada": User("ada-password", {"name": "Ada Lovelace", "email": "ada@example.test"}),
    "grace": User("grace-password", {"name": "Grace Hopper", "email": "grace@example.test"}),
}


def default_config(
    *,
    resource: str = DEFAULT_RESOURCE,
    resource_scopes: Sequence[str] = DEFAULT_RESOURCE_SCOPES,
    signing_alg: str = "RS256",
    token_format: str = "jwt",
    access_token_ttl: int | None = None,
    refresh_token_ttl: int | None = None,
    refresh_tokens: str = "always",
    registration: bool = True,
    client_credentials: bool = True,
    users: Mapping[str, User] = DEFAULT_USERS,
    client_secret: str | None = None,
    issuer_path: str = "",
    well_known: Sequence[str] = ("oauth", "openid-insert", "openid"),
    client_metadata_documents: Mapping[str, str] | None = None,
    dpop: bool = False,
) -> dict[str, Any]:
    """The provider's configuration (the JSON ``provider.mjs`` reads): the users, a public
    and two confidential clients, one resource server with ``resource_scopes``, JWT access
    tokens signed with ``signing_alg`` (RS256 or ES256; ``token_format="opaque"`` for
    introspection), refresh tokens by ``refresh_tokens`` (``always``, ``never``, ``openid``),
    the issuer at ``issuer_path`` with its metadata where ``well_known`` says, Client ID
    Metadata Documents from the loopback stand-ins of ``client_metadata_documents`` (https
    origin: http://127.0.0.1:PORT), DPoP-bound tokens for a token request with a proof
    when ``dpop`` (RFC 9449; off by default): see ``provider.mjs``.  A test edits the
    dict for more."""
    secret = client_secret or secrets.token_urlsafe(24)
    all_scopes = " ".join(("openid", "offline_access", *resource_scopes))
    code_grants = ["authorization_code", "refresh_token"]
    confidential = {
        "redirect_uris": [LOOPBACK_REDIRECT_URI],
        "application_type": "native",
        "response_types": ["code"],
        "grant_types": [*code_grants, *(["client_credentials"] if client_credentials else [])],
        "client_secret": secret,
        "scope": all_scopes,
    }
    ttl = {"AccessToken": access_token_ttl, "ClientCredentials": access_token_ttl}
    ttl["RefreshToken"] = refresh_token_ttl
    return {
        "port": 0,
        "issuer_path": issuer_path,
        "well_known": list(well_known),
        "users": {name: attrs.asdict(user) for name, user in users.items()},
        "clients": [
            {
                "client_id": PUBLIC_CLIENT_ID,
                "application_type": "native",
                "token_endpoint_auth_method": "none",
                "redirect_uris": [LOOPBACK_REDIRECT_URI],
                "response_types": ["code"],
                "grant_types": code_grants,
            },
            {
                **confidential,
                "client_id": CONFIDENTIAL_CLIENT_ID,
                "token_endpoint_auth_method": "client_secret_basic",
            },
            {
                **confidential,
                "client_id": CONFIDENTIAL_POST_CLIENT_ID,
                "token_endpoint_auth_method": "client_secret_post",
            },
            {
                "client_id": RESOURCE_SERVER_CLIENT_ID,
                "client_secret": secret,
                "token_endpoint_auth_method": "client_secret_basic",
                "response_types": [],
                "grant_types": [],
            },
        ],
        "resources": [
            {
                "match": resource,
                "scope": " ".join(resource_scopes),
                "alg": signing_alg,
                "format": token_format,
                **({"access_token_ttl": access_token_ttl} if access_token_ttl else {}),
            }
        ],
        "ttl": {name: seconds for name, seconds in ttl.items() if seconds is not None},
        "refresh_tokens": refresh_tokens,
        "client_metadata_documents": dict(client_metadata_documents or {}),
        "registration": registration,
        "client_credentials": client_credentials,
        "dpop": dpop,
    }


@attrs.frozen
class HttpResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return json.loads(self.body)


def _pass_every_status() -> urllib.request.BaseHandler:
    """A handler that hands back every response as it is: no redirect followed, no
    ``HTTPError`` for a 4xx (the test looks at the status)."""

    class PassThrough(urllib.request.HTTPErrorProcessor):
        def http_response(self, request: Any, response: Any) -> Any:
            return response

        https_response = http_response

    return PassThrough()


def _fetch(
    opener: urllib.request.OpenerDirector,
    method: str,
    url: str,
    form: Mapping[str, str] | None,
    headers: Mapping[str, str],
    json_body: Any = None,
) -> HttpResponse:
    request = urllib.request.Request(url, method=method, headers=dict(headers))
    if form is not None:
        request.data = urlencode(form).encode()
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    elif json_body is not None:
        request.data = json.dumps(json_body).encode()
        request.add_header("Content-Type", "application/json")
    with opener.open(request, timeout=_HTTP_SECONDS) as response:
        return HttpResponse(response.status, dict(response.headers.items()), response.read())


async def http_request(
    method: str,
    url: str,
    *,
    form: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    json_body: Any = None,
) -> HttpResponse:
    """One plain HTTP request (a form or JSON body if given), its response whatever the
    status."""
    opener = urllib.request.build_opener(_pass_every_status())
    return await anyio.to_thread.run_sync(
        _fetch, opener, method, url, form, headers or {}, json_body
    )


def basic_auth(client_id: str, secret: str) -> dict[str, str]:
    """The ``Authorization`` header of client_secret_basic (RFC 6749 section 2.3.1: each
    part form-urlencoded first)."""
    pair = f"{urlencode({'': client_id})[1:]}:{urlencode({'': secret})[1:]}"
    return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}


@attrs.frozen
class Pkce:
    verifier: str
    challenge: str

    @classmethod
    def new(cls) -> Pkce:
        verifier = secrets.token_urlsafe(48)
        digest = hashlib.sha256(verifier.encode("ascii")).digest()
        return cls(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode())


@attrs.frozen
class AuthorizationResponse:
    """The provider's last redirect, to the client's ``redirect_uri``, not visited."""

    url: str
    params: Mapping[str, str]

    @property
    def redirect_uri(self) -> str:
        """Where it goes, without its query."""
        return self.url.split("?", 1)[0].split("#", 1)[0]

    @property
    def code(self) -> str | None:
        return self.params.get("code")

    @property
    def state(self) -> str | None:
        return self.params.get("state")

    @property
    def iss(self) -> str | None:
        return self.params.get("iss")

    @property
    def error(self) -> str | None:
        return self.params.get("error")


class BrowserError(Exception):
    """The provider showed something a person would be stuck on (an error page, a refused
    sign-in, too many steps)."""


@attrs.define
class _Form:
    action: str
    method: str
    inputs: list[dict[str, str]] = attrs.field(factory=list)
    buttons: list[dict[str, str]] = attrs.field(factory=list)


class _Forms(HTMLParser):
    """The forms of a page: action, inputs and submit buttons (enough for these pages)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[_Form] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        attrs_ = {name: value or "" for name, value in attributes}
        if tag == "form":
            self.forms.append(_Form(attrs_.get("action", ""), attrs_.get("method", "get").upper()))
        elif tag == "input" and self.forms:
            self.forms[-1].inputs.append(attrs_)
        elif tag == "button" and self.forms and attrs_.get("type", "submit") == "submit":
            self.forms[-1].buttons.append(attrs_)

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())


class TestBrowser:
    """A person's browser against the provider: cookies, forms, redirects (see the module).

    Like a real one it keeps its cookies from one ``authorize`` to the next, so the
    provider's session (who signed in, what they allowed) carries over: a second
    authorization of the same client and scopes shows no page at all.  One browser is one
    person: a call for another user raises (use another ``provider.browser()``)."""

    __test__ = False  # not a pytest test class

    def __init__(self, provider: OidcProvider) -> None:
        self._provider = provider
        self._cookies = http.cookiejar.CookieJar()
        self.signed_in_as: str | None = None
        #: The path of every form submitted, in order (``.../login``, ``.../consent``).
        self.submitted: list[str] = []

    async def authorize(
        self, authorization_url: str, *, user: str, password: str | None = None, deny: bool = False
    ) -> AuthorizationResponse:
        """Sign in as ``user`` (its configured password unless ``password``) if the
        provider asks, allow (or ``deny``) if it asks; the redirect to the client, unvisited."""
        if self.signed_in_as not in (None, user):
            raise BrowserError(f"this browser is signed in as {self.signed_in_as}, not {user}")
        if password is None:
            password = self._provider.users[user].password
        return await anyio.to_thread.run_sync(
            self._authorize, authorization_url, user, password, deny
        )

    async def deliver(self, response: AuthorizationResponse) -> HttpResponse:
        """What the browser does next, once the client under test listens: visit the
        redirect (the client's loopback page), with none of the provider's cookies."""
        return await http_request("GET", response.url)

    def _authorize(self, url: str, user: str, password: str, deny: bool) -> AuthorizationResponse:
        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self._cookies), _pass_every_status()
        )
        origin = _origin(self._provider.issuer)
        method, form, signing_in = "GET", None, False
        for _ in range(_BROWSER_STEPS):
            if _origin(url) != origin:
                return _authorization_response(url)
            response = _fetch(opener, method, url, form, {})
            if response.status in (301, 302, 303, 307, 308):
                if signing_in:
                    self.signed_in_as, signing_in = user, False
                url = urljoin(url, response.headers["Location"])
                method, form = "GET", None  # 303 and the provider's 302s: a GET
                continue
            page = _Forms()
            page.feed(response.body.decode("utf-8", "replace"))
            if response.status != 200 or len(page.forms) != 1:
                raise BrowserError(f"{response.status} at {url}: {' '.join(page.text)[:300]}")
            signing_in = any(field.get("type") == "password" for field in page.forms[0].inputs)
            url, method, form = _submit(url, page.forms[0], user, password, deny)
            self.submitted.append(urlsplit(url).path)
        raise BrowserError(f"no redirect to the client after {_BROWSER_STEPS} steps")


def _submit(
    url: str, form: _Form, user: str, password: str, deny: bool
) -> tuple[str, str, dict[str, str]]:
    """What a person does on the page: types the name and password, or picks a button."""
    fields: dict[str, str] = {}
    for field in form.inputs:
        name, kind = field.get("name"), field.get("type", "text")
        if not name:
            continue
        fields[name] = {"text": user, "password": password}.get(kind, field.get("value", ""))
    choice = "deny" if deny else "allow"
    buttons = form.buttons
    button = next((b for b in buttons if b.get("value") == choice), buttons[0] if buttons else {})
    if button.get("name"):
        fields[button["name"]] = button.get("value", "")
    return urljoin(url, form.action), form.method, fields


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _authorization_response(url: str) -> AuthorizationResponse:
    query = urlsplit(url).query
    params = {name: values[0] for name, values in parse_qs(query, keep_blank_values=True).items()}
    return AuthorizationResponse(url, params)


@attrs.frozen
class OidcProvider:
    issuer: str
    discovery: Mapping[str, Any]
    config: Mapping[str, Any]
    users: Mapping[str, User]
    log_path: Path
    #: The provider's process id (a test reads its command line)
    pid: int

    @property
    def authorization_endpoint(self) -> str:
        return str(self.discovery["authorization_endpoint"])

    @property
    def token_endpoint(self) -> str:
        return str(self.discovery["token_endpoint"])

    def client_secret(self, client_id: str) -> str:
        clients = self.config["clients"]
        return next(str(c["client_secret"]) for c in clients if c["client_id"] == client_id)

    def browser(self) -> TestBrowser:
        return TestBrowser(self)

    async def jwks(self) -> Mapping[str, Any]:
        response = await http_request("GET", str(self.discovery["jwks_uri"]))
        assert response.status == 200, response
        keys: Mapping[str, Any] = response.json()
        return keys

    def authorization_url(
        self,
        *,
        client_id: str = PUBLIC_CLIENT_ID,
        redirect_uri: str,
        scope: str,
        resource: str | None,
        pkce: Pkce,
        state: str,
    ) -> str:
        """An authorization request as an MCP client makes it (code, S256, ``resource``)."""
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": scope,
            "state": state,
            "code_challenge": pkce.challenge,
            "code_challenge_method": "S256",
            **({"resource": resource} if resource is not None else {}),
        }
        return f"{self.authorization_endpoint}?{urlencode(params)}"

    def log(self) -> str:
        """What the provider wrote on stderr so far (for assertion messages)."""
        return self.log_path.read_text(errors="replace")

    def stdout(self) -> str:
        """What the provider wrote on stdout so far (its ready line, the package's notes)."""
        return self.log_path.with_name("stdout").read_text(errors="replace")


def require_provider() -> None:
    """Fail (never skip) when the package is not installed."""
    manifest = PROJECT / "node_modules" / "oidc-provider" / "package.json"
    if not manifest.is_file():
        raise AssertionError(f"{manifest} is missing: run `make oidc-provider`")
    assert NODE.is_file(), f"no node binary at {NODE}: reinstall the venv"


@asynccontextmanager
async def oidc_provider(
    config: Mapping[str, Any] | None = None, *, users: Mapping[str, User] = DEFAULT_USERS
) -> AsyncIterator[OidcProvider]:
    """The provider running with ``config`` (``default_config()`` if none); see the module.
    ``users`` must be the users ``config`` names (their passwords are the browser's)."""
    require_provider()
    config = default_config(users=users) if config is None else config
    with tempfile.TemporaryDirectory(prefix="mrtr-oidc-") as folder:
        where = Path(folder)
        config_path = where / "config.json"
        descriptor = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump(config, file)
        stdout_path, log_path = where / "stdout", where / "stderr"
        with stdout_path.open("wb") as stdout, log_path.open("wb") as stderr:
            process = await anyio.open_process(
                [str(NODE), str(PROVIDER_JS), str(config_path)],
                stdin=None,
                stdout=stdout,
                stderr=stderr,
                cwd=PROJECT,
            )
        try:
            issuer = await _ready(process, stdout_path, log_path)
            discovery = await _metadata(issuer)
            yield OidcProvider(issuer, discovery, config, users, log_path, process.pid)
        finally:
            await _stop(process)


async def _ready(process: anyio.abc.Process, stdout_path: Path, log_path: Path) -> str:
    """The issuer, once the provider printed it (it writes the line when it listens)."""
    with anyio.move_on_after(_STARTUP_SECONDS):
        while process.returncode is None:
            for line in stdout_path.read_text().splitlines():
                if line.startswith("ISSUER "):
                    return line.split(" ", 1)[1]
            await anyio.sleep(0.02)
    raise AssertionError(f"the OpenID provider did not start:\n{log_path.read_text()}")


def metadata_urls(issuer: str) -> list[str]:
    """Where an MCP client looks for an issuer's metadata, in the spec's order: RFC 8414
    with the path inserted, OpenID with the path inserted, OpenID with it appended (for an
    issuer without a path: the RFC 8414 URL, then the OpenID one)."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    if not path:
        return [
            f"{origin}/.well-known/oauth-authorization-server",
            f"{origin}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


async def _metadata(issuer: str) -> Mapping[str, Any]:
    """The first metadata document served (the provider may be told to serve fewer)."""
    for url in metadata_urls(issuer):
        response = await http_request("GET", url)
        if response.status == 200:
            document: Mapping[str, Any] = response.json()
            return document
    raise AssertionError(f"no metadata for {issuer} at {metadata_urls(issuer)}")


async def _stop(process: anyio.abc.Process) -> None:
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(5):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
