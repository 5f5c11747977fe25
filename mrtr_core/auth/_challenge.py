"""The ``WWW-Authenticate`` Bearer challenge: what a resource server answers a request
that lacks a good token with, and how a client reads it.

RFC 6750 section 3 defines the ``Bearer`` challenge and its parameters (``realm``,
``scope``, ``error``, ``error_description``, ``error_uri``); RFC 9728 section 5.1
adds ``resource_metadata``, the URL of the protected-resource metadata, which is
how an MCP client finds the authorization server.  The header's grammar is RFC
9110's (section 11.6.1): challenges separated by commas, each a scheme and
``name=value`` parameters (a token or a quoted string), also separated by
commas, so a reader has to tell a parameter from the next challenge.

A peer's header is bounded (:data:`MAX_HEADER_LENGTH`, :data:`MAX_PARAMS`) and
read strictly: a malformed one is :class:`InvalidChallenge`, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from .._errors import INTERNAL_ERROR, LocalProtocolError, RemoteProtocolError, clip, describe

#: The longest ``WWW-Authenticate`` value read (a server's header, however many challenges).
MAX_HEADER_LENGTH: Final = 8192
#: The most parameters read across the challenges of one header.
MAX_PARAMS: Final = 64

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_TOKEN_RE = re.compile(_TOKEN)
_TOKEN68_RE = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_QUOTED_RE = re.compile(r'"((?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[\t\x20-\x7e\x80-\xff])*)"')
_SPACE = " \t"
#: The parameters of RFC 6750 and RFC 9728 this reader gives names to.
_KNOWN = ("realm", "scope", "error", "error_description", "error_uri", "resource_metadata")


class InvalidChallenge(RemoteProtocolError):
    """A server's ``WWW-Authenticate`` header that breaks its grammar or its bounds."""

    code = INTERNAL_ERROR


@attrs.frozen(kw_only=True)
class Challenge:
    """One challenge of a ``WWW-Authenticate`` header: its scheme (as sent), and its
    parameters (names lower-cased, as RFC 9110 makes them case-insensitive) or the
    ``token68`` some schemes carry instead."""

    scheme: str
    params: Mapping[str, str] = attrs.field(factory=dict)
    token68: str | None = None


def parse_challenges(header: str) -> list[Challenge]:
    """Every challenge of one ``WWW-Authenticate`` value (``InvalidChallenge`` if it is
    malformed or past the bounds)."""
    if not isinstance(header, str):
        raise LocalProtocolError(f"a WWW-Authenticate value is a str, not {describe(header)}")
    if len(header) > MAX_HEADER_LENGTH:
        raise InvalidChallenge(f"WWW-Authenticate longer than {MAX_HEADER_LENGTH} characters")
    reader = _Reader(header)
    challenges: list[Challenge] = []
    params_read = 0
    reader.skip_commas()
    while not reader.done():
        scheme = reader.token("an auth scheme")
        params: dict[str, str] = {}
        token68: str | None = None
        # Whether a comma was read after the last parameter: the next challenge may
        # begin right there (its scheme is a token not followed by "=").
        separated = False
        if reader.spaces():
            token68 = reader.token68()
            while token68 is None:
                name_at = reader.at
                name = reader.maybe_token()
                if name is None or not reader.equals():
                    reader.at = name_at
                    break
                params_read += 1
                if params_read > MAX_PARAMS:
                    raise InvalidChallenge(f"more than {MAX_PARAMS} challenge parameters")
                key = name.lower()
                if key in params:
                    raise InvalidChallenge(f"the parameter {clip(key)!r} appears twice")
                params[key] = reader.value()
                separated = reader.comma()
                if not separated:
                    break
        challenges.append(Challenge(scheme=scheme, params=params, token68=token68))
        if not reader.done() and not separated and not reader.comma():
            raise InvalidChallenge(f"unexpected text at {reader.at}: {clip(reader.rest())!r}")
        reader.skip_commas()
    return challenges


@attrs.frozen(kw_only=True)
class BearerChallenge:
    """The ``Bearer`` challenge (RFC 6750; ``resource_metadata``: RFC 9728).

    ``scope`` is the scopes the resource asks for, in order (``None``: no ``scope``
    parameter; a client then chooses by the metadata's ``scopes_supported``).
    ``extra`` keeps the other parameters, as sent.
    """

    realm: str | None = None
    scope: tuple[str, ...] | None = None
    error: str | None = None
    error_description: str | None = None
    error_uri: str | None = None
    resource_metadata: str | None = None
    extra: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def from_headers(
        cls, values: str | Iterable[str], *, scheme: str = "Bearer"
    ) -> BearerChallenge | None:
        """The Bearer challenge among a response's ``WWW-Authenticate`` values (one
        string, or each field's value), or ``None`` when there is none.  Raises
        ``InvalidChallenge`` for a malformed header or two Bearer challenges.
        ``scheme="DPoP"``: the DPoP challenge (RFC 9449, section 7.1: the same
        parameters, ``algs`` among the extra ones)."""
        found: list[Challenge] = []
        for value in [values] if isinstance(values, str) else list(values):
            found += [c for c in parse_challenges(value) if c.scheme.lower() == scheme.lower()]
        if not found:
            return None
        if len(found) > 1:
            raise InvalidChallenge(f"more than one {scheme} challenge")
        (bearer,) = found
        if bearer.token68 is not None:
            raise InvalidChallenge(f"a {scheme} challenge carries parameters, not a token68")
        params = dict(bearer.params)
        scope = params.pop("scope", None)
        known = {name: params.pop(name, None) for name in _KNOWN if name != "scope"}
        return cls(
            scope=None if scope is None else tuple(scope.split()),
            extra=params,
            **known,
        )

    def to_header(self) -> str:
        """The ``WWW-Authenticate`` value: ``Bearer`` and its parameters, each quoted."""
        fields: dict[str, str | None] = {
            "realm": self.realm,
            "resource_metadata": self.resource_metadata,
            "scope": None if self.scope is None else " ".join(self.scope),
            "error": self.error,
            "error_description": self.error_description,
            "error_uri": self.error_uri,
            **self.extra,
        }
        parts = []
        for name, value in fields.items():
            if value is None:
                continue
            if not _TOKEN_RE.fullmatch(name):
                raise LocalProtocolError(f"{describe(name)} is not a parameter name")
            parts.append(f"{name}={_quoted(value)}")
        return "Bearer " + ", ".join(parts) if parts else "Bearer"


def _quoted(value: str) -> str:
    if not isinstance(value, str) or any(c in value for c in "\r\n\x00"):
        raise LocalProtocolError(f"a challenge parameter is one line of text: {describe(value)}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Reader:
    """A cursor over one header value."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def done(self) -> bool:
        self.spaces()
        return self.at >= len(self.text)

    def rest(self) -> str:
        return self.text[self.at :]

    def spaces(self) -> bool:
        start = self.at
        while self.at < len(self.text) and self.text[self.at] in _SPACE:
            self.at += 1
        return self.at > start

    def skip_commas(self) -> None:
        while self.comma():
            pass

    def comma(self) -> bool:
        self.spaces()
        if self.at < len(self.text) and self.text[self.at] == ",":
            self.at += 1
            return True
        return False

    def equals(self) -> bool:
        self.spaces()
        if self.at < len(self.text) and self.text[self.at] == "=":
            self.at += 1
            self.spaces()
            return True
        return False

    def maybe_token(self) -> str | None:
        self.spaces()
        found = _TOKEN_RE.match(self.text, self.at)
        if found is None:
            return None
        self.at = found.end()
        return found.group()

    def token(self, what: str) -> str:
        found = self.maybe_token()
        if found is None:
            raise InvalidChallenge(f"expected {what} at {self.at}: {clip(self.rest())!r}")
        return found

    def token68(self) -> str | None:
        """A token68 that stands alone (up to the end or a comma), else ``None``."""
        found = _TOKEN68_RE.match(self.text, self.at)
        if found is None:
            return None
        after = self.text[found.end() :].lstrip(_SPACE)
        if after and after[0] != ",":
            return None  # the first parameter's name and "=", not a token68
        self.at = found.end()
        return found.group()

    def value(self) -> str:
        if self.at < len(self.text) and self.text[self.at] == '"':
            found = _QUOTED_RE.match(self.text, self.at)
            if found is None:
                raise InvalidChallenge(f"an unterminated quoted string at {self.at}")
            self.at = found.end()
            return re.sub(r"\\(.)", r"\1", found.group(1))
        return self.token("a parameter value")


__all__ = [
    "MAX_HEADER_LENGTH",
    "MAX_PARAMS",
    "BearerChallenge",
    "Challenge",
    "InvalidChallenge",
    "parse_challenges",
]
