"""The user agent of the authorization step: given the authorization URL, it returns
the URL the authorization server redirected it to (carrying ``code``, ``state`` and
``iss``).  A person's browser is one (``mrtr call``, next); :func:`headless_user_agent`
is the one the tests and the conformance client use: it fetches the URL and reads the
redirect's ``Location``, which is what an authorization server that needs no login
(the suite's mock) answers with.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urljoin

from .fetch import FetchFailed, fetch, shown_url

__all__ = ["UserAgent", "headless_user_agent"]

#: ``await user_agent(authorization_url)`` -> the redirect URL it ended at.
UserAgent = Callable[[str], Awaitable[str]]


async def headless_user_agent(authorization_url: str) -> str:
    """GET the authorization URL and return its redirect's ``Location`` (resolved)."""
    fetched = await fetch(authorization_url, max_bytes=64 * 1024)
    location = fetched.header("location")
    if not 300 <= fetched.status < 400 or location is None:
        raise FetchFailed(
            f"{shown_url(authorization_url)} answered HTTP {fetched.status}, not a redirect",
            kind="http",
            status=fetched.status,
        )
    return urljoin(authorization_url, location)
