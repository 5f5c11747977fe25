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
from ._validation import schema_problem

_COMMON = frozenset({"type", "title", "description", "default"})
_KEYWORDS: dict[str, frozenset[str]] = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
    "array": _COMMON | {"minItems", "maxItems", "items"},
}
STRING_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_NUMERIC = ("minimum", "maximum", "default")


# --- what each field type's keywords must hold: a rule is a message and a JSON Schema --------
# The first rule a field's definition fails names its problem; the schemas are checked by
# the one validator (``_validation``), as answers and tool arguments are.

_COUNT = {"type": "integer", "minimum": 0}
_NUMBER = {"type": "number"}
_STRINGS = {"type": "array", "items": {"type": "string"}}
#: ``[{"const": str, "title": str}, ...]``: enum options with display labels.
_TITLED_OPTIONS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"const": {"type": "string"}, "title": {"type": "string"}},
        "required": ["const", "title"],
        "additionalProperties": False,
    },
}


def _keyword(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A rule's schema: keyword ``name``, when present, matches ``schema``."""
    return {"properties": {name: schema}}


def _present(*names: str) -> dict[str, Any]:
    return {"anyOf": [{"required": [name]} for name in names]}


_TEXTS = (
    ("title must be a string", _keyword("title", {"type": "string"})),
    ("description must be a string", _keyword("description", {"type": "string"})),
)
_RULES: dict[str, tuple[tuple[str, Mapping[str, Any]], ...]] = {
    "string": (
        *_TEXTS,
        ("minLength must be a non-negative integer", _keyword("minLength", _COUNT)),
        ("maxLength must be a non-negative integer", _keyword("maxLength", _COUNT)),
        (
            f"format must be one of {sorted(STRING_FORMATS)}",
            _keyword("format", {"enum": sorted(STRING_FORMATS)}),
        ),
        ("enum must be a list of strings", _keyword("enum", _STRINGS)),
        (
            "enumNames must be a list of strings, beside enum",
            {**_keyword("enumNames", _STRINGS), "dependentRequired": {"enumNames": ["enum"]}},
        ),
        (
            'oneOf must be a list of {"const": string, "title": string}',
            _keyword("oneOf", _TITLED_OPTIONS),
        ),
        ("an enum field has enum or oneOf, not both", {"not": {"required": ["enum", "oneOf"]}}),
        (
            # The spec's enum schemas have no such keywords (its StringSchema has them).
            "an enum field has no minLength, maxLength or format",
            {
                "if": _present("enum", "oneOf"),
                "then": {"not": _present("minLength", "maxLength", "format")},
            },
        ),
        ("default must be a string", _keyword("default", {"type": "string"})),
    ),
    "number": (
        *_TEXTS,
        *((f"{name} must be a number", _keyword(name, _NUMBER)) for name in _NUMERIC),
    ),
    "integer": (
        *_TEXTS,
        *((f"{name} must be a number", _keyword(name, _NUMBER)) for name in _NUMERIC),
    ),
    "boolean": (*_TEXTS, ("default must be a boolean", _keyword("default", {"type": "boolean"}))),
    "array": (  # a multi-select of enum strings
        *_TEXTS,
        ("minItems must be a non-negative integer", _keyword("minItems", _COUNT)),
        ("maxItems must be a non-negative integer", _keyword("maxItems", _COUNT)),
        (
            'an array field is a multi-select: items must be {"type": "string", '
            '"enum": [...]} or {"anyOf": [{"const": ..., "title": ...}, ...]}',
            {
                "required": ["items"],
                **_keyword(
                    "items",
                    {
                        "anyOf": [
                            {
                                "type": "object",
                                "properties": {"type": {"const": "string"}, "enum": _STRINGS},
                                "required": ["type", "enum"],
                                "additionalProperties": False,
                            },
                            {
                                "type": "object",
                                "properties": {"anyOf": _TITLED_OPTIONS},
                                "required": ["anyOf"],
                                "additionalProperties": False,
                            },
                        ]
                    },
                ),
            },
        ),
        ("default must be a list of strings", _keyword("default", _STRINGS)),
    ),
}


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


def _keyword_problem(kind: str, definition: Mapping[str, Any]) -> str | None:
    """The message of the first rule of ``kind`` that ``definition`` fails, or ``None``."""
    for message, rule in _RULES[kind]:
        if schema_problem(rule, dict(definition)) is not None:
            return message
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
