"""``mrtr serve``'s ``--auth-*`` flags: the endpoint as an OAuth resource server.

:func:`add_auth_arguments` puts them on the parser; :meth:`AuthOptions.from_args`
reads them back, checked together (:class:`~.serve_options.UsageError`), and
:meth:`AuthOptions.resource_auth` builds the endpoint's
:class:`~mrtr_transports.auth.ResourceAuth`.  Tokens are checked one of two ways:

* as JWTs (the default): the issuer's signature (``--auth-jwks``, else the ``jwks_uri``
  of the issuer's metadata), ``iss``, ``aud``, expiry;
* by asking the authorization server (``--auth-introspection URL``, RFC 7662), for
  opaque tokens: the server authenticates there as the client ``--auth-client-id``,
  with the secret ``--auth-client-secret FILE|env:NAME`` names.  The secret itself
  never goes on the command line, where any user of the machine reads it
  (``/proc/PID/cmdline``), and never into the options' ``repr``.

``--http`` and ``--ws`` take them (the WebSocket's upgrade request carries the token;
its resource is the endpoint's ``http(s)://`` URL, ``--auth-audience``); stdio none.
``--auth-dpop`` takes DPoP-bound tokens (RFC 9449) beside bearer ones;
``--auth-dpop required``, only them (``mrtr_transports.auth.Dpop``);
``--auth-dpop-nonces`` demands a nonce of the server's in each proof, made with the
secret ``--auth-dpop-nonce-secret FILE|env:NAME`` names (every worker given the same)
or a random one per process.  The proofs seen are kept in the process, or, with
``--single-use redis://...``, in that Redis for every worker (``serve.py`` opens it:
``mrtr_transports.stores.redis_proofs``), so a proof is good once across them.
"""

from __future__ import annotations

import argparse
import math
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._secret_source import SecretSourceError, read_secret_source
from .serve_options import UsageError

if TYPE_CHECKING:
    from ..auth import Dpop, ResourceAuth
    from ..auth.proof_replay import ProofMemory
    from ..server.app import ServerApp

__all__ = ["AuthOptions", "add_auth_arguments", "read_client_secret"]

#: A client secret is a line of text, not a document: more than this is a wrong file.
MAX_SECRET_BYTES = 4096
#: The clock skew a verifier may allow (``JwtVerifier``'s own bound).
MAX_LEEWAY = 300.0
#: The shortest secret DPoP nonces are made with (``Dpop``'s own bound).
MIN_NONCE_SECRET_BYTES = 16
#: ``--auth-dpop``'s values (the flag alone: ``allowed``).
DPOP_MODES = ("allowed", "required")


def add_auth_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--auth-*`` options of ``mrtr serve`` on ``parser``."""
    parser.add_argument(
        "--auth-issuer",
        metavar="URL",
        help="HTTP, WebSocket: require OAuth bearer tokens of this authorization server (their "
        "iss; JWTs unless --auth-introspection); needs --auth-audience (or --public-url, "
        "HTTP). See docs/auth.md",
    )
    parser.add_argument(
        "--auth-jwks",
        metavar="URL",
        help="with --auth-issuer: the authorization server's key set (default: the "
        "jwks_uri of the issuer's metadata)",
    )
    parser.add_argument(
        "--auth-audience",
        metavar="URL",
        help="with --auth-issuer: the endpoint's public http(s) URL (a WebSocket "
        "endpoint's too), which tokens must name as their audience (default: --public-url)",
    )
    parser.add_argument(
        "--auth-introspection",
        metavar="URL",
        help="with --auth-issuer: check each token at this token introspection "
        "endpoint (RFC 7662; opaque tokens) instead of as a JWT; needs --auth-client-id "
        "and --auth-client-secret",
    )
    parser.add_argument(
        "--auth-client-id",
        metavar="ID",
        help="with --auth-introspection: this server's client id at the authorization server",
    )
    parser.add_argument(
        "--auth-client-secret",
        metavar="FILE|env:NAME",
        help="with --auth-introspection: the file, or the environment variable "
        "NAME, that holds this server's client secret (never the secret itself)",
    )
    parser.add_argument(
        "--auth-scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="with --auth-issuer: a scope every request's token needs (repeatable); "
        "the 401 challenge names these, the metadata publishes them with the tools' scopes",
    )
    parser.add_argument(
        "--auth-dpop",
        nargs="?",
        const="allowed",
        choices=DPOP_MODES,
        metavar="allowed|required",
        help="with --auth-issuer: take DPoP-bound tokens (RFC 9449: each request "
        "with a proof by the token's key) beside bearer ones; 'required': only them. "
        "A bound token sent as a bearer one is refused either way. The proofs seen are "
        "kept in the process, or with --single-use in that Redis, shared by every worker",
    )
    parser.add_argument(
        "--auth-dpop-nonces",
        action="store_true",
        default=None,
        help="with --auth-dpop: demand a nonce of this server's in every DPoP "
        "proof (RFC 9449 section 9: 401 use_dpop_nonce, the nonce in DPoP-Nonce)",
    )
    parser.add_argument(
        "--auth-dpop-nonce-secret",
        metavar="FILE|env:NAME",
        help="with --auth-dpop-nonces: the file, or the environment variable NAME, "
        "holding the secret nonces are made with (16 bytes at least; give every worker "
        "the same; default: a random one per process)",
    )
    parser.add_argument(
        "--auth-leeway",
        type=float,
        metavar="SEC",
        help=f"with --auth-issuer: the clock skew allowed on a token's exp, nbf and "
        f"iat (default 60, at most {MAX_LEEWAY:g})",
    )


@dataclass(frozen=True, slots=True)
class AuthOptions:
    """The checked ``--auth-*`` options: tokens of ``issuer`` for ``audience`` required."""

    issuer: str
    #: The endpoint's public URL (``--auth-audience``, else ``--public-url``).
    audience: str
    jwks: str | None = None
    #: The RFC 7662 endpoint, or ``None``: tokens are JWTs.
    introspection: str | None = None
    client_id: str | None = None
    #: Read from the file or the environment variable ``--auth-client-secret`` names.
    client_secret: str | None = field(default=None, repr=False)
    #: Scopes every request's token needs (``--auth-scope``).
    scopes: tuple[str, ...] = ()
    #: ``--auth-leeway``, or ``None``: the verifier's default.
    leeway: float | None = None
    #: ``--auth-dpop``: ``"allowed"``, ``"required"``, or ``None`` (bearer tokens only).
    dpop: str | None = None
    #: ``--auth-dpop-nonces``: demand server nonces, made with ``dpop_nonce_secret``
    #: (``--auth-dpop-nonce-secret``; ``None``: a random one per process).
    dpop_nonces: bool = False
    dpop_nonce_secret: bytes | None = field(default=None, repr=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace, transport: str) -> AuthOptions | None:
        """The options the ``--auth-*`` flags of ``args`` give, or ``None`` when none
        is given; :class:`~.serve_options.UsageError` when they do not fit."""
        introspection_flags = (args.auth_introspection, args.auth_client_id)
        given = (args.auth_issuer, args.auth_jwks, args.auth_audience, *introspection_flags)
        dpop = (args.auth_dpop, args.auth_dpop_nonces, args.auth_dpop_nonce_secret)
        given += (args.auth_client_secret, args.auth_leeway, *dpop, *args.auth_scope)
        if all(value is None for value in given):
            return None
        if transport not in ("http", "ws"):  # (the spec: stdio takes no tokens)
            raise UsageError(
                "--auth-issuer and the other --auth-* flags only apply to --http and --ws"
            )
        audience = args.auth_audience or args.public_url
        if transport == "ws" and args.auth_issuer is not None and audience is None:
            raise UsageError(
                "--auth-issuer over --ws needs --auth-audience: the audience, the "
                "endpoint's http(s) URL (the upgrade's)"
            )
        if args.auth_issuer is None or audience is None:
            raise UsageError(
                "--auth-jwks, --auth-audience and the other --auth-* flags need "
                "--auth-issuer, and --auth-issuer the audience (--auth-audience or "
                "--public-url)"
            )
        for flag, url in (
            ("--auth-issuer", args.auth_issuer),
            ("--auth-jwks", args.auth_jwks),
            ("--auth-introspection", args.auth_introspection),
        ):
            if url is not None and not _is_http_url(url):
                raise UsageError(f"{flag} {url!r}: an absolute http(s) URL")
        if not _is_http_url(audience):
            raise UsageError(f"--auth-audience {audience!r}: the endpoint's absolute http(s) URL")
        secret = _introspection_credentials(args)
        for scope in args.auth_scope:
            if not scope or any(c <= " " or c in '"\\' or c > "~" for c in scope):
                raise UsageError(f"--auth-scope {scope!r}: one scope token (RFC 6749 3.3)")
        leeway = args.auth_leeway
        if leeway is not None and not (0 <= leeway <= MAX_LEEWAY and math.isfinite(leeway)):
            raise UsageError(f"--auth-leeway must be 0 to {MAX_LEEWAY:g} seconds")
        nonce_secret = _dpop_nonce_secret(args)
        return cls(
            issuer=args.auth_issuer,
            audience=audience,
            jwks=args.auth_jwks,
            introspection=args.auth_introspection,
            client_id=args.auth_client_id,
            client_secret=secret,
            scopes=tuple(dict.fromkeys(args.auth_scope)),
            leeway=leeway,
            dpop=args.auth_dpop,
            dpop_nonces=bool(args.auth_dpop_nonces),
            dpop_nonce_secret=nonce_secret,
        )

    def resource_auth(
        self, app: ServerApp, *, seen_proofs: ProofMemory | None = None
    ) -> ResourceAuth:
        """The endpoint's :class:`~mrtr_transports.auth.ResourceAuth` for ``app``: its
        metadata names the issuer and publishes the required scopes with every scope a
        tool of ``app`` asks for (what a client asks the authorization server for).
        ``seen_proofs``: where ``--auth-dpop`` keeps the proofs seen (default: in the
        process)."""
        from ..auth import IntrospectionVerifier, JwtVerifier, ResourceAuth
        from ..auth.verifier import TokenVerifier

        leeway: dict[str, Any] = {} if self.leeway is None else {"leeway": self.leeway}
        verifier: TokenVerifier
        if self.introspection is not None:
            assert self.client_id is not None and self.client_secret is not None
            verifier = IntrospectionVerifier(
                endpoint=self.introspection,
                client_id=self.client_id,
                client_secret=self.client_secret,
                audience=self.audience,
                issuer=self.issuer,
                **leeway,
            )
        else:
            verifier = JwtVerifier(
                issuer=self.issuer, audience=self.audience, jwks=self.jwks, **leeway
            )
        return ResourceAuth(
            verifier,
            resource=self.audience,
            authorization_servers=[self.issuer],
            scopes=self.scopes,
            scopes_supported=[*dict.fromkeys([*self.scopes, *_tool_scopes(app)])] or None,
            dpop=None if self.dpop is None else self._dpop(seen_proofs),
        )

    def _dpop(self, seen_proofs: ProofMemory | None) -> Dpop:
        from ..auth import Dpop

        return Dpop(
            required=self.dpop == "required",
            nonces=self.dpop_nonces,
            nonce_secret=self.dpop_nonce_secret,
            seen_proofs=seen_proofs,
        )


def _introspection_credentials(args: argparse.Namespace) -> str | None:
    """The client secret of ``--auth-introspection``'s flags (checked), or ``None``."""
    if args.auth_introspection is None:
        if args.auth_client_id is not None or args.auth_client_secret is not None:
            raise UsageError("--auth-client-id and --auth-client-secret need --auth-introspection")
        return None
    if args.auth_jwks is not None:
        raise UsageError("--auth-jwks and --auth-introspection: tokens are checked one way")
    if args.auth_client_id is None or args.auth_client_secret is None:
        raise UsageError("--auth-introspection needs --auth-client-id and --auth-client-secret")
    return read_client_secret(args.auth_client_secret)


def _dpop_nonce_secret(args: argparse.Namespace) -> bytes | None:
    """The secret of ``--auth-dpop-nonce-secret`` (checked with its flags), or ``None``."""
    if args.auth_dpop_nonces and args.auth_dpop is None:
        raise UsageError("--auth-dpop-nonces needs --auth-dpop")
    source = args.auth_dpop_nonce_secret
    if source is None:
        return None
    flag = "--auth-dpop-nonce-secret"
    if not args.auth_dpop_nonces:
        raise UsageError(f"{flag} needs --auth-dpop-nonces")
    secret = _one_line(source, flag)
    if len(secret.encode()) < MIN_NONCE_SECRET_BYTES:
        raise UsageError(f"{flag} {source}: {MIN_NONCE_SECRET_BYTES} bytes at least")
    return secret.encode()


def read_client_secret(source: str) -> str:
    """The secret in file ``source`` (or ``@PATH``), or in the environment variable
    ``NAME`` for ``env:NAME`` (one line: surrounding whitespace and the final newline
    dropped); :class:`~.serve_options.UsageError` saying which and why, never quoting it."""
    return _one_line(source, "--auth-client-secret")


def _one_line(source: str, flag: str) -> str:
    """The secret ``source`` names for ``flag``: one line (surrounding whitespace and
    the final newline dropped); :class:`~.serve_options.UsageError`, never quoting it."""
    try:
        secret = read_secret_source(source, flag=flag, max_bytes=MAX_SECRET_BYTES).strip()
    except SecretSourceError as exc:
        raise UsageError(str(exc)) from None
    if not secret or "\n" in secret:
        raise UsageError(f"{flag} {source}: one line, the secret")
    return secret


def _is_http_url(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _tool_scopes(app: ServerApp) -> list[str]:
    """Every scope a tool of ``app`` asks for (an ``McpApp``; none for another app)."""
    from ..apps.mcp_app import McpApp

    if not isinstance(app, McpApp):
        return []
    return [scope for tool in app.tools.values() for scope in tool.scopes]
