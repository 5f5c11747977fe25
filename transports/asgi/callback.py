"""The URL-elicitation callback: where a provider sends the user's browser back.

``GET {endpoint}/auth/callback?state=<prefix>.<provider state>&code=...`` (the
path under the endpoint is ``callback_path``, default ``auth/callback``):

* a pending interaction's state settles it (``code`` -> completed,
  ``error=access_denied`` -> declined, another ``error`` -> failed) and gets a
  short page, 200;
* an unknown (one we never issued, whatever its shape), already used or
  expired state gets 410 (Gone): a replayed callback never settles anything twice;
* a request that is not a provider's callback (no ``state``, neither ``code``
  nor ``error``, a parameter twice) gets 400; a query longer than
  ``MAX_CALLBACK_QUERY`` bytes, 414; any method but GET, 405;
* a store that cannot answer (an ``MrtrError`` from ``settle``) gets 503 with
  ``Retry-After``: the interaction is still pending, and reloading the page
  sends the same callback again.

Every page is a fixed text: nothing from the query is echoed.  Its headers:
``text/html; charset=utf-8``, ``Cache-Control: no-store`` (the URL carries a
code), ``Referrer-Policy: no-referrer``, a ``Content-Security-Policy`` that
forbids scripts, styles from elsewhere, forms and framing, and ``nosniff``.

Who may call it: the browser arrives by a top-level navigation redirected from
the provider, so it sends no ``Origin`` or the provider's: ``Origin`` is not
checked here (the unguessable state is the capability, and a GET that settles
an interaction is all there is).  ``Host`` is checked as on the endpoint
(DNS rebinding), with the host of the server's public URL added.

The route knows the app through its ``url_flows`` attribute (duck-typed:
:class:`CallbackTarget`; ``mrtr_transports.apps.url_flows.UrlFlows`` is one);
an app without it has no callback route (404 as any other path).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterable
from typing import Protocol
from urllib.parse import urlsplit

import mrtr_core as m

from .policy import AccessPolicy, Headers
from .routes import Page

__all__ = [
    "CURRENT_CALLBACK_URL",
    "DEFAULT_CALLBACK_PATH",
    "CallbackRoute",
    "CallbackTarget",
    "callback_route",
]

log = logging.getLogger("mrtr.server.http")

DEFAULT_CALLBACK_PATH = "auth/callback"


#: The absolute callback URL of the HTTP server serving the current request (set in each
#: connection's task): where a URL flow asked in a handler sends the browser back.
CURRENT_CALLBACK_URL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mrtr_callback_url", default=None
)


class CallbackTarget(Protocol):
    """What the route needs of an app's URL flows (``UrlFlows`` is one)."""

    def now(self) -> float: ...

    async def settle(self, callback: m.server.Callback, now: float) -> m.server.Interaction: ...


_PAGE = (
    "<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head>"
    "<body><h1>{title}</h1><p>{text}</p></body></html>"
)
#: The pages, by outcome: fixed texts (nothing from the request is shown).
_PAGES = {
    m.server.InteractionStatus.COMPLETED: (200, "Done", "You can close this window."),
    m.server.InteractionStatus.DECLINED: (
        200,
        "Declined",
        "You declined at the provider. You can close this window.",
    ),
    m.server.InteractionStatus.FAILED: (
        200,
        "Not completed",
        "The provider reported an error. You can close this window.",
    ),
}
_GONE = (
    410,
    "Link expired",
    "This link has expired or was already used. You can close this window.",
)
_BAD = (400, "Bad request", "This is not a request this server expected.")
_TOO_LONG = (414, "Bad request", "This request is too long.")
_METHOD = (405, "Bad request", "This address takes GET only.")
_UNAVAILABLE = (
    503,
    "Try again",
    "This server could not record the outcome just now. Reload this page in a moment.",
)

PAGE_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
]


class CallbackRoute:
    """The callback path under the endpoint, served for one app's URL flows."""

    def __init__(self, target: CallbackTarget, path: str, policy: AccessPolicy) -> None:
        self.target = target
        self.path = path
        self.policy = policy

    async def answer(self, method: str, query: bytes, headers: Headers, peer: str | None) -> Page:
        """The page for one request to the callback path (``query``: after the ``?``)."""
        # Origin is a cross-site provider's (or none) on a top-level navigation: not checked.
        host_only = Headers(
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, values in headers.fields.items()
            if k != "origin"
            for v in values
        )
        refusal = self.policy.refusal(host_only, peer)
        if refusal is not None:
            log.warning("callback refused: %s", refusal)
            return Page(403, m.http._post.error_body(refusal, m.ErrorCode.INVALID_REQUEST))
        if method != "GET":  # (not even HEAD: nothing but the browser comes here)
            return _page(_METHOD, [(b"allow", b"GET")])
        if len(query) > m.server._url_flows.MAX_CALLBACK_QUERY:
            return _page(_TOO_LONG)
        try:
            callback = m.server.read_callback(query)  # (a state we never issued: gone)
            settled = await self.target.settle(callback, self.target.now())
        except m.server.BadCallback as exc:
            log.info("bad callback request: %s", exc)
            return _page(_BAD)
        except m.server.InteractionGone as exc:
            log.info("callback for no pending interaction: %s", exc.reason)
            return _page(_GONE)
        except m.MrtrError as exc:  # the store could not answer (a shared one unreachable)
            log.warning("callback not recorded: %s", exc)
            return _page(_UNAVAILABLE, [(b"retry-after", b"5")])
        return _page(_PAGES[settled.status])


def _page(page: tuple[int, str, str], extra: Iterable[tuple[bytes, bytes]] = ()) -> Page:
    status, title, text = page
    body = _PAGE.format(title=title, text=text).encode()
    return Page(status, body, b"text/html; charset=utf-8", [*PAGE_HEADERS, *extra])


def callback_route(
    app: object,
    *,
    endpoint: str,
    callback_path: str,
    allowed_hosts: Iterable[str] | None,
    trusted_proxies: Iterable[str],
    public_url: str | None,
) -> CallbackRoute | None:
    """The route for ``app``'s URL flows (its ``url_flows``), or ``None`` without them."""
    target = getattr(app, "url_flows", None)
    if target is None or not hasattr(target, "settle"):
        return None
    path = endpoint.rstrip("/") + "/" + callback_path.strip("/")
    hosts = list(allowed_hosts or ())
    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"public_url must be an absolute http(s) URL, not {public_url!r}")
        hosts.append(parts.netloc)
    return CallbackRoute(target, path, AccessPolicy(hosts, None, trusted_proxies))
