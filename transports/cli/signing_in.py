"""How the client commands sign in to an HTTP or WebSocket server that requires OAuth.

The model: ``mrtr call`` (and ``get-prompt``, ``read``, ``list``) is an OAuth
client acting for the person at the terminal.  On an ``http(s)://`` or ``ws://`` TARGET it
carries an :class:`~mrtr_transports.client.oauth.OAuthProvider` whose user agent
is the person's browser and a loopback listener
(:mod:`mrtr_transports.client.oauth.loopback`, bound before the provider is built:
its port is in the ``redirect_uri``).  Tokens and client registrations are kept in
a :class:`~mrtr_transports.client.oauth.FileTokenStore` (owner-only, 0600) at
:func:`default_token_store` or ``--token-store PATH``, so a later command reuses
the token, refreshed when it is about to expire, and signs in again only when the
server refuses it.

A 401 (or a 403 ``insufficient_scope``) to any request runs the flow in band: the
sign-in is the person's time, bounded by ``--login-timeout`` alone (minutes: a person
is typing a password); the client's own bounds (the handshake's, each leg's:
seconds, a server's time) stop while it runs and start again whole after
(:mod:`mrtr_transports.client.person_time`), so nothing is sent twice and a server
that needs no token costs no extra request.  Over a WebSocket the upgrade request is
the first thing sent, and a 401 to it runs the flow between two tries, each bound by
the connect timeout alone (``WsLink.start``).  The token is the one of the endpoint's
``http://`` URL (its resource), shared with an HTTP TARGET there.

``--dpop`` asks for DPoP-bound tokens (RFC 9449) where the authorization server
offers them: the key they are bound to is kept with the token in the store, so a
later command proves with it (and ``mrtr auth forget`` drops both).

``--token SOURCE`` (``-``, ``@PATH``, ``env:NAME``: :mod:`.secrets_input`)
sends a token given by hand instead, and no flow runs; so does an
``Authorization`` given with ``--header``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import webbrowser
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..client.errors import AuthorizationFailed
from ..client.fetch import shown_url
from ..client.oauth import FileTokenStore, OAuthProvider, loopback_user_agent
from . import url_consent
from .connecting import UsageError
from .secrets_input import client_secret, read_token
from .terminal_text import one_line

__all__ = ["SignIn", "default_token_store", "sign_in_plan", "signed_in"]


def default_token_store() -> Path:
    """``$XDG_CONFIG_HOME/mrtr/tokens.json``, else ``~/.config/mrtr/tokens.json`` (the
    XDG base directory rule: a relative ``XDG_CONFIG_HOME`` is ignored)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".config"
    return root / "mrtr" / "tokens.json"


@dataclass(frozen=True)
class SignIn:
    """How a command authenticates: a ``token`` given by hand, the OAuth flow
    (``oauth``), or neither (a stdio TARGET, an ``Authorization`` ``--header``)."""

    token: str | None = field(default=None, repr=False)
    oauth: bool = False
    store: Path = field(default_factory=default_token_store)
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_metadata_url: str | None = None
    open_browser: bool = True
    login_timeout: float | None = None
    dpop: bool = False

    def headers(self, headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """``headers`` and the ``Authorization`` of the token given by hand, if any."""
        if self.token is None:
            return list(headers)
        return [*headers, ("Authorization", f"Bearer {self.token}")]


def sign_in_plan(
    args: argparse.Namespace, kind: str, headers: Sequence[tuple[str, str]], stdin: TextIO
) -> SignIn:
    """The :class:`SignIn` of the command line (``UsageError`` for a mistake)."""
    given_authorization = any(name.lower() == "authorization" for name, _ in headers)
    oauth_flags = args.client_id is not None or args.client_metadata_url is not None or args.dpop
    if kind == "stdio" and (args.token is not None or oauth_flags):
        raise UsageError(
            "--token, --client-id, --client-metadata-url, --dpop: a stdio TARGET has none"
        )
    if args.token is not None and given_authorization:
        raise UsageError("--token and --header Authorization: give one of them")
    if args.dpop and (args.token is not None or given_authorization):
        raise UsageError("--dpop signs in with OAuth: not with --token or --header Authorization")
    token = None if args.token is None else read_token(args.token, stdin)
    store = Path(args.token_store) if args.token_store else default_token_store()
    oauth = kind in ("http", "ws") and token is None and not given_authorization
    if oauth:
        try:  # (a broken store is the person's to fix, before anything is sent)
            FileTokenStore(store).entries()
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise UsageError(f"the token store {store} cannot be read ({reason})") from None
    return SignIn(
        token=token,
        oauth=oauth,
        store=store,
        client_id=args.client_id,
        client_secret=client_secret(args.client_secret_env) if args.client_id else None,
        client_metadata_url=args.client_metadata_url,
        open_browser=not args.no_browser,
        login_timeout=args.login_timeout,
        dpop=args.dpop,
    )


@asynccontextmanager
async def signed_in(
    plan: SignIn, endpoint: str, err: TextIO, prog: str
) -> AsyncIterator[OAuthProvider | None]:
    """The provider the client takes (``auth=``) for the block; ``None`` when ``plan``
    runs no OAuth."""
    if not plan.oauth:
        yield None
        return

    def show(url: str) -> None:
        _show_sign_in(err, prog, endpoint, url, plan)

    opener = _open_browser(err) if plan.open_browser else None
    async with loopback_user_agent(
        show=show, open_browser=opener, timeout=plan.login_timeout
    ) as agent:
        provider = OAuthProvider(
            endpoint,
            user_agent=agent,
            redirect_uri=agent.redirect_uri,
            store=FileTokenStore(plan.store),
            client_id=plan.client_id,
            client_secret=plan.client_secret,
            client_metadata_url=plan.client_metadata_url,
            client_name="mrtr",
            dpop=plan.dpop,
        )
        yield provider


def _show_sign_in(err: TextIO, prog: str, endpoint: str, url: str, plan: SignIn) -> None:
    """The sign-in URL, whole and alone on its line (``url_consent``'s rule: one that
    would need escaping is refused instead); nothing is opened when it is refused."""
    refusal = url_consent.refusal(url)
    if refusal is not None:
        raise AuthorizationFailed(
            f"the authorization server's sign-in URL is refused: {refusal}", kind="http"
        )
    marks = " (not https)" if url_consent.warning(url) else ""
    wait = "" if plan.login_timeout is None else f"; waiting up to {plan.login_timeout:g} s"
    opening = "your browser opens it, or open it yourself" if plan.open_browser else "open it"
    err.write(
        f"{prog}: {one_line(shown_url(endpoint))} needs you to sign in{marks}: "
        f"{opening}{wait}:\n{url}\n"
    )
    err.flush()


def _open_browser(err: TextIO) -> Callable[[str], None]:
    """``open_browser(url)``: the person's browser, by the standard ``webbrowser`` module,
    in a process of its own (a browser's chatter never reaches our stdout, the result's,
    and a browser that runs in the terminal cannot take it over)."""

    def open_browser(url: str) -> None:
        try:
            webbrowser.get()
        except webbrowser.Error:
            err.write("(no browser found: open the URL above yourself)\n")
            err.flush()
            return
        _launched.append(
            subprocess.Popen(
                [sys.executable, "-m", "webbrowser", "-t", url],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    return open_browser


#: The browser launchers started (kept, so none is reaped as garbage while it runs).
_launched: list[subprocess.Popen[bytes]] = []
