"""The OAuth flow's requests: form and JSON bodies, JSON answers, over the one bounded
exchange (``mrtr_transports.client.fetch``: size, time, no redirect followed; a
failure's message names the URL without its query and never a request header).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from .. import fetch as exchange
from ..fetch import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, Fetched, FetchFailed, shown_url

__all__ = ["FetchFailed", "Fetched", "fetch", "fetch_json", "read_json", "shown_url"]


async def fetch(
    url: str,
    *,
    method: str = "GET",
    form: dict[str, str] | None = None,
    json_body: Any = None,
    headers: Sequence[tuple[str, str]] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    ssl_context: ssl.SSLContext | None = None,
) -> Fetched:
    """One request to ``url`` (a form or a JSON body) and its whole response."""
    body = b""
    fields = list(headers)
    if form is not None:
        body = urlencode(form).encode()
        fields.insert(0, ("content-type", "application/x-www-form-urlencoded"))
    elif json_body is not None:
        body = json.dumps(json_body).encode()
        fields.insert(0, ("content-type", "application/json"))
    return await exchange.fetch(
        url,
        method=method,
        body=body,
        headers=fields,
        max_bytes=max_bytes,
        timeout=timeout,
        tls=ssl_context,
    )


def read_json(fetched: Fetched, url: str) -> Any:
    """The body as JSON (``FetchFailed`` when it is not)."""
    try:
        return json.loads(fetched.body)
    except ValueError:
        raise FetchFailed(
            f"{shown_url(url)} answered HTTP {fetched.status} with a body that is not JSON",
            kind="http",
            status=fetched.status,
        ) from None


async def fetch_json(url: str, **options: Any) -> tuple[int, Any]:
    """``fetch`` and the body as JSON: ``(status, value)``."""
    fetched = await fetch(url, **options)
    return fetched.status, read_json(fetched, url)
