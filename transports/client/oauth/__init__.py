"""OAuth for the HTTP client (the specification's "Authorization"): the provider the
link uses (:class:`OAuthProvider`), the token stores, the user agent of the
authorization step and the bounded fetch they share.  See ``docs/client.md``,
"Authorization"."""

from ..errors import AuthorizationFailed
from .fetch import FetchFailed
from .loopback import AuthorizationTimedOut, LoopbackUserAgent, loopback_user_agent
from .provider import OAuthProvider
from .store import FileTokenStore, MemoryTokenStore, TokenStore
from .user_agent import UserAgent, headless_user_agent

__all__ = [
    "AuthorizationFailed",
    "AuthorizationTimedOut",
    "FetchFailed",
    "FileTokenStore",
    "LoopbackUserAgent",
    "MemoryTokenStore",
    "OAuthProvider",
    "TokenStore",
    "UserAgent",
    "headless_user_agent",
    "loopback_user_agent",
]
