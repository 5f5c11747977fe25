"""A JWT's JOSE header read without verifying anything (RFC 7515, section 4), sans-IO:
what a verifier looks at to pick the key (``kid``) and to refuse an algorithm before
any key is touched (``alg``).  Nothing read here is trusted: the signature, checked
after, covers it.

Bounded: the header segment is ``MAX_HEADER_LENGTH`` characters at most, of the
base64url alphabet only, and decodes to a JSON object; anything else is
:class:`MalformedToken` (the token itself never quoted).
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Final

from .._errors import INTERNAL_ERROR, RemoteProtocolError

__all__ = ["MAX_HEADER_LENGTH", "MalformedToken", "read_jose_header"]

#: Characters of a header segment (a header names ``alg``, ``kid``, ``typ``, a ``jwk``).
MAX_HEADER_LENGTH: Final = 2048
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")


class MalformedToken(RemoteProtocolError):
    """A token that is not a JWS compact serialization with a JSON object header."""

    code = INTERNAL_ERROR


def read_jose_header(token: str) -> dict[str, Any]:
    """The JOSE header of the compact JWS ``token`` (unverified)."""
    first, dot, _ = token.partition(".")
    if not dot or len(first) > MAX_HEADER_LENGTH or not _SEGMENT.fullmatch(first):
        raise MalformedToken("the token is not a well-formed JWT")
    try:
        header = json.loads(base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)))
    except (ValueError, RecursionError):  # (RecursionError: "[[[[..." nested deep)
        raise MalformedToken("the token is not a well-formed JWT") from None
    if not isinstance(header, dict):
        raise MalformedToken("the token is not a well-formed JWT")
    return header
