"""Which URLs ``mrtr call`` lets a person consent to open, and how it shows them.

The model: a URL elicitation asks the person to open a URL the server chose.
Consent only means something if the URL shown is the URL opened, and if opening
it cannot do what a browser's address bar would refuse to do silently.  So:

* the URL is shown whole and plain, alone on its own line: never escaped or
  cut, because a URL that would need escaping is refused instead;
* refused (the elicitation is declined, with a line saying why, and nothing is
  opened): any scheme but ``http`` and ``https`` (``javascript:``, ``data:``,
  ``file:`` run or read things where they are opened), a URL with credentials
  or any user part (``https://bank.example@evil.example/`` names the host after
  the ``@``), a URL with no host, and one holding a control, format (bidi, zero
  width) or space character (what the terminal shows would not be what is opened);
* a plain ``http`` URL to a host other than the loopback is marked ``(not https)``.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import urlsplit

from mrtr_core.server._ask_rules import _is_loopback  # (the server's rule for the same URLs)

__all__ = ["ALLOWED_SCHEMES", "refusal", "warning"]

ALLOWED_SCHEMES = ("http", "https")


def refusal(url: str) -> str | None:
    """Why ``url`` is not offered to the person, or ``None`` when it may be."""
    hidden = next((c for c in url if unicodedata.category(c)[0] in "CZ"), None)
    if hidden is not None:
        return f"it holds a hidden or control character (U+{ord(hidden):04X})"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is no number raises here)
    except ValueError as exc:
        return f"it is not a valid URL ({exc})"
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        shown = f"{scheme}:" if scheme else "a URL without a scheme"
        return f"{shown} URLs are refused (only http and https)"
    if "@" in parts.netloc:
        return "it carries credentials (user:pass@ before the host)"
    if not parts.hostname:
        return "it names no host"
    return None


def warning(url: str) -> str | None:
    """``"not https"`` for a plain ``http`` URL to a host other than the loopback."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "https" or _is_loopback(parts.hostname or ""):
        return None
    return "not https"
