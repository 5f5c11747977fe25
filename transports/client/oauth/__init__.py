"""OAuth for the HTTP client (the specification's "Authorization"): the provider the
link uses (:class:`OAuthProvider`), the token stores, the user agents of the
authorization step (a person's browser and a loopback listener,
:func:`loopback_user_agent`; or :func:`headless_user_agent`), the JWT-bearer grant's
assertion sources (:func:`workload_identity`, :func:`enterprise_identity`) and the bounded
fetch they share.  See ``docs/auth.md`` and ``docs/client.md``, "Authorization"."""

from ..errors import AuthorizationFailed
from .fetch import FetchFailed
from .grants import AssertionSource, enterprise_identity, workload_identity
from .loopback import AuthorizationTimedOut, LoopbackUserAgent, loopback_user_agent
from .provider import OAuthProvider
from .store import FileTokenStore, MemoryTokenStore, TokenStore
from .user_agent import UserAgent, headless_user_agent

__all__ = [
    "AssertionSource",
    "AuthorizationFailed",
    "AuthorizationTimedOut",
    "FetchFailed",
    "FileTokenStore",
    "LoopbackUserAgent",
    "MemoryTokenStore",
    "OAuthProvider",
    "TokenStore",
    "UserAgent",
    "enterprise_identity",
    "headless_user_agent",
    "loopback_user_agent",
    "workload_identity",
]
