"""What the spec allows in an elicitation the server builds: form fields and URLs.

A form's ``requestedSchema`` is "a restricted subset of JSON Schema": flat, each
property one of the spec's ``PrimitiveSchemaDefinition`` (schema 2026-07-28:
``StringSchema``, ``NumberSchema``, ``BooleanSchema`` and the ``EnumSchema``
variants).  Clients render forms from exactly these; anything richer (a nested
object, an array of objects, a ``$ref``) they may refuse or render wrongly, so the
builder refuses it first.

A URL elicitation sends the user's browser somewhere.  Only an absolute ``https:``
URL without credentials is a place a server may send a user (``http:`` is allowed
for a loopback host, for development); ``javascript:``, ``data:`` and ``file:`` are
the classic ways to turn a link into an attack.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .._errors import LocalProtocolError

_COMMON = frozenset({"type", "title", "description", "default"})
_KEYWORDS: dict[str, frozenset[str]] = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
    "array": _COMMON | {"minItems", "maxItems", "items"},
}
STRING_FORMATS = frozenset({"email", "uri", "date", "date-time"})


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _titled_options(value: object) -> bool:
    """``[{"const": str, "title": str}, ...]``: enum options with display labels."""
    return isinstance(value, list) and all(
        isinstance(v, Mapping)
        and set(v) == {"const", "title"}
        and isinstance(v["const"], str)
        and isinstance(v["title"], str)
        for v in value
    )


def check_primitive_schema(name: object, definition: object) -> None:
    """Raise ``LocalProtocolError`` unless ``definition`` is a ``PrimitiveSchemaDefinition``."""
    if not isinstance(name, str):
        raise LocalProtocolError(f"form field names are strings, not {name!r}")
    if not isinstance(definition, Mapping):
        raise LocalProtocolError(f"form field {name!r}: its schema must be an object")
    kind = definition.get("type")
    allowed = _KEYWORDS.get(kind) if isinstance(kind, str) else None
    if not isinstance(kind, str) or allowed is None:
        raise LocalProtocolError(
            f"form field {name!r}: type must be string, number, integer, boolean or array "
            f"(an enum multi-select), not {kind!r}; forms are flat, without nested objects"
        )
    extra = sorted(str(k) for k in definition if k not in allowed)
    if extra:
        raise LocalProtocolError(
            f"form field {name!r}: {extra} not allowed in a {kind} field of a form "
            "(the spec's PrimitiveSchemaDefinition)"
        )
    problem = _keyword_problem(kind, definition)
    if problem:
        raise LocalProtocolError(f"form field {name!r}: {problem}")


def _keyword_problem(kind: str, d: Mapping[str, Any]) -> str | None:
    for text in ("title", "description"):
        if text in d and not isinstance(d[text], str):
            return f"{text} must be a string"
    if kind == "string":
        for bound in ("minLength", "maxLength"):
            if bound in d and not _is_count(d[bound]):
                return f"{bound} must be a non-negative integer"
        # (isinstance first: a list or an object is unhashable, and no format either)
        if "format" in d and not (isinstance(d["format"], str) and d["format"] in STRING_FORMATS):
            return f"format must be one of {sorted(STRING_FORMATS)}"
        if "enum" in d and not _strings(d["enum"]):
            return "enum must be a list of strings"
        if "enumNames" in d and ("enum" not in d or not _strings(d["enumNames"])):
            return "enumNames must be a list of strings, beside enum"
        if "oneOf" in d and not _titled_options(d["oneOf"]):
            return 'oneOf must be a list of {"const": string, "title": string}'
        if "enum" in d and "oneOf" in d:
            return "an enum field has enum or oneOf, not both"
        if ("enum" in d or "oneOf" in d) and {"minLength", "maxLength", "format"} & set(d):
            # The spec's enum schemas have no such keywords (its StringSchema has them).
            return "an enum field has no minLength, maxLength or format"
        if "default" in d and not isinstance(d["default"], str):
            return "default must be a string"
    elif kind in ("number", "integer"):
        for bound in ("minimum", "maximum", "default"):
            if bound in d and not _is_number(d[bound]):
                return f"{bound} must be a number"
    elif kind == "boolean":
        if "default" in d and not isinstance(d["default"], bool):
            return "default must be a boolean"
    else:  # array: a multi-select of enum strings
        for bound in ("minItems", "maxItems"):
            if bound in d and not _is_count(d[bound]):
                return f"{bound} must be a non-negative integer"
        items = d.get("items")
        if not isinstance(items, Mapping):
            items = {}
        untitled = (
            set(items) == {"type", "enum"} and items["type"] == "string" and _strings(items["enum"])
        )
        titled = set(items) == {"anyOf"} and _titled_options(items["anyOf"])
        if not (untitled or titled):
            return (
                'an array field is a multi-select: items must be {"type": "string", '
                '"enum": [...]} or {"anyOf": [{"const": ..., "title": ...}, ...]}'
            )
        if "default" in d and not _strings(d["default"]):
            return "default must be a list of strings"
    return None


def check_elicitation_url(url: object) -> None:
    """Raise ``LocalProtocolError`` unless ``url`` is a URL a user may be sent to."""
    if not isinstance(url, str):
        raise LocalProtocolError("the URL must be a string")
    if any(ord(c) <= 0x20 or c == "\x7f" for c in url):
        raise LocalProtocolError("the URL must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        has_credentials = parts.username is not None or parts.password is not None
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise LocalProtocolError(f"not a valid URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise LocalProtocolError(
            f"a URL elicitation sends the user to an https: URL, not {scheme or 'a relative'}: one"
        )
    if not host:
        raise LocalProtocolError("the URL must be absolute, with a host")
    if has_credentials:
        raise LocalProtocolError("the URL must not carry credentials (user:password@)")
    if scheme == "http" and not _is_loopback(host):
        raise LocalProtocolError("http: is allowed for a loopback host only; use https:")


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
