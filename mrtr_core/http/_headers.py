"""The Streamable HTTP header rules of 2026-07-28, written once (sans-IO).

Every POST that carries a JSON-RPC request mirrors parts of its body into
headers, so that intermediaries can route on them without reading the body:

* ``MCP-Protocol-Version``: ``params._meta["io.modelcontextprotocol/protocolVersion"]``;
* ``Mcp-Method``: ``method``;
* ``Mcp-Name``: ``params.name`` of ``tools/call`` and ``prompts/get``,
  ``params.uri`` of ``resources/read``, ``params.taskId`` of ``tasks/get``,
  ``tasks/update`` and ``tasks/cancel`` (SEP-2663: routing by task);
* ``Mcp-Param-{Name}``: for ``tools/call``, each argument whose property in the
  tool's ``inputSchema`` is annotated ``"x-mcp-header": "Name"`` (omitted when
  the argument is absent or null).

Values of ``Mcp-Name`` and ``Mcp-Param-*`` go plain when they are visible
ASCII and spaces without surrounding whitespace, and do not look like the
sentinel; any other value goes as ``=?base64?{base64 of its UTF-8}?=``.

The three sides of the rule:

* a tool definition: :func:`schema_header_params` validates the annotations of
  an ``inputSchema`` (raising :class:`InvalidHeaderAnnotation`: a server must
  not offer such a tool, a client drops it from ``tools/list``) and returns
  them as *header params*, header name -> argument path;
* a client: :func:`request_headers` is the headers a POST carries;
* a server: :func:`check_request_headers` compares the headers it received
  with the body and raises a :class:`HeaderMismatch` (-32020, HTTP 400).
"""

from __future__ import annotations

import base64
import binascii
import decimal
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeGuard

from .._errors import HEADER_MISMATCH, MrtrError, RemoteProtocolError, describe
from .._meta import META_PROTOCOL_VERSION


class Header:
    """The names of the headers of MCP's Streamable HTTP binding (each a plain ``str``).

    A namespace, not an enum, so that a name goes into a header list as it is.
    """

    #: Mirrors ``_meta["io.modelcontextprotocol/protocolVersion"]`` (2026-07-28); a
    #: 2025-era client sends it after ``initialize``.
    PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
    #: Mirrors ``method``.
    METHOD: Final = "Mcp-Method"
    #: Mirrors ``params.name`` (``tools/call``, ``prompts/get``), ``params.uri``
    #: (``resources/read``) or ``params.taskId`` (``tasks/get``, ``tasks/update``,
    #: ``tasks/cancel``).
    NAME: Final = "Mcp-Name"
    #: ``Mcp-Param-{Name}`` mirrors a ``tools/call`` argument annotated ``x-mcp-header``.
    PARAM_PREFIX: Final = "Mcp-Param-"
    #: A 2025-era session's id.
    SESSION_ID: Final = "Mcp-Session-Id"
    #: The last event a 2025-era client saw, to resume a stream after it.
    LAST_EVENT_ID: Final = "Last-Event-ID"


#: The schema keyword that mirrors an argument into ``Mcp-Param-{value}``.
ANNOTATION = "x-mcp-header"
#: The methods whose ``Mcp-Name`` mirrors a field of ``params``, and that field.
NAME_FIELDS: Mapping[str, str] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # SEP-2663: an intermediary routes a task's requests to the instance holding it
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
#: The property types an annotation may sit on (``number`` is not one).
HEADER_TYPES = ("string", "integer", "boolean")
#: Integers beyond this magnitude have no header form (JavaScript's safe range).
MAX_SAFE_INTEGER = 2**53 - 1
#: How deep an ``inputSchema`` may nest before it is refused unchecked.
MAX_SCHEMA_DEPTH = 64
BASE64_PREFIX = "=?base64?"
BASE64_SUFFIX = "?="

#: Header params: the name after ``Mcp-Param-`` -> the argument's property path.
HeaderParams = Mapping[str, Sequence[str]]
#: Received header fields: lower-case name -> its values, in the order received.
ReceivedHeaders = Mapping[str, Sequence[str]]

_TCHARS = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
#: Keywords whose value maps names to subschemas (the names are not keywords).
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
#: Keywords whose value is instance data, not a schema: nothing in it is an annotation.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


# --- Errors --------------------------------------------------------------------------


class InvalidHeaderAnnotation(MrtrError, ValueError):
    """An ``x-mcp-header`` annotation the specification forbids: the tool is invalid.

    ``header`` is the annotation's value and ``pointer`` where it sits in the
    schema (a JSON pointer, ``#/properties/a``).
    """

    def __init__(self, message: str, *, header: Any = None, pointer: str = "#") -> None:
        super().__init__(message)
        self.header = header
        self.pointer = pointer


class HeaderMismatch(RemoteProtocolError):
    """A header that mirrors the body does not match it (-32020, HTTP 400).

    ``header`` names the header; ``request_id`` is the request's id, when it has one.
    """

    code = HEADER_MISMATCH

    def __init__(self, message: str, *, header: str, request_id: str | int | None = None) -> None:
        super().__init__(f"Header mismatch: {message}", request_id=request_id)
        self.header = header


class MissingHeader(HeaderMismatch):
    """A header the body requires is not there."""


class MalformedHeader(HeaderMismatch):
    """A header value with characters a field value may not have, or bad ``=?base64?``."""


class RepeatedHeader(HeaderMismatch):
    """A header that mirrors one body value was sent more than once."""


# --- Values --------------------------------------------------------------------------


def is_header_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is an HTTP field name: a non-empty token (RFC 9110 ``tchar``)."""
    return isinstance(name, str) and bool(name) and set(name) <= _TCHARS


def is_header_value(value: str) -> bool:
    """Whether ``value`` may go in a header as it is: visible ASCII, space and tab only
    (no CR or LF to end the field early, no other control characters)."""
    return all(ch == "\t" or " " <= ch <= "~" for ch in value)


def _looks_encoded(raw: str) -> bool:
    return (
        raw.startswith(BASE64_PREFIX)
        and raw.endswith(BASE64_SUFFIX)
        and len(raw) >= len(BASE64_PREFIX) + len(BASE64_SUFFIX)
    )


def encode_header_value(text: str) -> str:
    """``text`` as a header value: plain when it is visible ASCII and spaces, without
    surrounding whitespace, and does not look like the sentinel; otherwise
    ``=?base64?...?=`` of its UTF-8."""
    plain = (
        all(" " <= ch <= "~" for ch in text) and text == text.strip() and not _looks_encoded(text)
    )
    if plain:
        return text
    return BASE64_PREFIX + base64.b64encode(text.encode("utf-8")).decode("ascii") + BASE64_SUFFIX


def decode_header_value(raw: str) -> str | None:
    """A received ``Mcp-Name`` or ``Mcp-Param-*`` value as text: ``=?base64?...?=``
    decoded, any other value as it is.

    ``None`` when it is malformed: bad base64 (alphabet or padding), not UTF-8,
    or a plain value with characters other than visible ASCII, space and tab.
    """
    if _looks_encoded(raw):
        try:
            return base64.b64decode(
                raw[len(BASE64_PREFIX) : -len(BASE64_SUFFIX)], validate=True
            ).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
    return raw if is_header_value(raw) else None


def header_text(value: Any) -> str | None:
    """An argument's text in its ``Mcp-Param-*`` header, or ``None`` when it has none.

    Strings as they are, booleans as ``true``/``false``, integers (and integral
    floats) in decimal within the safe range; null, other numbers, arrays and
    objects have no header form.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) <= MAX_SAFE_INTEGER else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return str(int(value))
    if isinstance(value, str):
        return value
    return None


def header_matches(decoded: str, value: Any) -> bool:
    """Whether a decoded ``Mcp-Param-*`` value mirrors the argument ``value``.

    Numbers compare numerically (``42.0`` is ``42``); booleans as ``true`` or
    ``false``; strings exactly.
    """
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if isinstance(value, (int, float)):
        try:
            number = decimal.Decimal(decoded.strip())
        except decimal.InvalidOperation:
            return False
        return number.is_finite() and number == decimal.Decimal(value)
    return isinstance(value, str) and decoded == value


# --- Tool definitions ------------------------------------------------------------------


def _pointer(trail: Sequence[str]) -> str:
    return "#" + "".join("/" + step.replace("~", "~0").replace("/", "~1") for step in trail)


def schema_header_params(
    input_schema: Any, *, tool: str | None = None
) -> dict[str, tuple[str, ...]]:
    """The header params of a tool's ``inputSchema``: header name -> argument path.

    Raises :class:`InvalidHeaderAnnotation` (naming ``tool`` when given) for an
    annotation that is not a non-empty HTTP token (RFC 9110 ``tchar``), that
    sits on anything but a string, integer or boolean property, that repeats
    another (case-insensitively), or that is not reached from the root through
    ``properties`` alone (it is under ``items``, ``anyOf``, ``$defs``, ... or on
    the root).  The values of ``const``, ``enum``, ``default`` and ``examples``
    are data, not schemas.  A schema nested deeper than ``MAX_SCHEMA_DEPTH`` is
    refused.  Anything that is not a mapping has no annotations.
    """
    found: dict[str, tuple[str, ...]] = {}
    folded: dict[str, str] = {}
    prefix = f"tool {describe(tool)}: " if tool is not None else ""

    def refuse(message: str, name: Any, trail: Sequence[str]) -> InvalidHeaderAnnotation:
        where = _pointer(trail)
        return InvalidHeaderAnnotation(
            f"{prefix}{message} (at {where})", header=name, pointer=where
        )

    def annotation(node: Mapping[str, Any], path: tuple[str, ...] | None, trail: list[str]) -> None:
        name = node[ANNOTATION]
        if not path:
            raise refuse(
                f"x-mcp-header {describe(name)} is not statically reachable: it goes only on "
                "properties reached from the root through `properties` alone",
                name,
                trail,
            )
        if not is_header_name(name):
            raise refuse(f"x-mcp-header {describe(name)} is not an HTTP token", name, trail)
        kind = node.get("type")
        if kind not in HEADER_TYPES:
            raise refuse(
                f"x-mcp-header {describe(name)} is on a {describe(kind)} property: "
                "only string, integer or boolean properties may be mirrored",
                name,
                trail,
            )
        other = folded.get(name.lower())
        if other is not None:
            raise refuse(
                f"x-mcp-header {describe(name)} is used twice (also as {describe(other)}: "
                "names are compared case-insensitively)",
                name,
                trail,
            )
        folded[name.lower()] = name
        found[name] = path

    def walk(node: Any, path: tuple[str, ...] | None, trail: list[str], depth: int) -> None:
        # ``path`` is the property path while the chain from the root is only
        # ``properties`` keys, None once it went through anything else.
        if not isinstance(node, (list, Mapping)):
            return
        if depth > MAX_SCHEMA_DEPTH:
            raise refuse("the inputSchema is nested too deeply to check", None, trail)
        if isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, None, [*trail, str(index)], depth + 1)
            return
        if ANNOTATION in node:
            annotation(node, path, trail)
        for key, value in node.items():
            key = str(key)
            if key == ANNOTATION or key in _DATA_KEYWORDS:
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                for prop, sub in value.items():
                    reached = None
                    if key == "properties" and path is not None:
                        reached = (*path, str(prop))
                    walk(sub, reached, [*trail, key, str(prop)], depth + 1)
            else:
                walk(value, None, [*trail, key], depth + 1)

    walk(input_schema, (), [], 0)
    return found


# --- Requests ------------------------------------------------------------------------


def _params_of(message: Mapping[str, Any]) -> Mapping[str, Any]:
    params = message.get("params")
    return params if isinstance(params, Mapping) else {}


def _body_version(params: Mapping[str, Any]) -> Any:
    meta = params.get("_meta")
    return meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None


def _value_at(arguments: Any, path: Sequence[str]) -> Any:
    """The argument at ``path``; ``None`` when it is absent."""
    value = arguments
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def called_tool(message: Mapping[str, Any]) -> str | None:
    """The tool a ``tools/call`` message calls (``None`` for any other message)."""
    if message.get("method") != "tools/call":
        return None
    name = _params_of(message).get("name")
    return name if isinstance(name, str) else None


def request_headers(
    message: Mapping[str, Any],
    *,
    protocol_version: str | None = None,
    header_params: HeaderParams | None = None,
) -> list[tuple[str, str]]:
    """The headers that mirror ``message`` on its POST, in order.

    ``protocol_version`` stands in when the body's ``_meta`` names none;
    ``header_params`` are those of the tool a ``tools/call`` calls (from its
    ``inputSchema``, see :func:`schema_header_params`).
    """
    params = _params_of(message)
    version = _body_version(params)
    if not isinstance(version, str):
        version = protocol_version
    headers: list[tuple[str, str]] = []
    if version:
        headers.append((Header.PROTOCOL_VERSION, version))
    method = message.get("method")
    if not isinstance(method, str):
        return headers
    headers.append((Header.METHOD, encode_header_value(method)))
    field = NAME_FIELDS.get(method)
    name = params.get(field) if field is not None else None
    if not isinstance(name, str):
        return headers
    headers.append((Header.NAME, encode_header_value(name)))
    if method == "tools/call" and header_params:
        arguments = params.get("arguments")
        for header, path in header_params.items():
            text = header_text(_value_at(arguments, path))
            if text is not None:
                headers.append((Header.PARAM_PREFIX + header, encode_header_value(text)))
    return headers


def header_fields(fields: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Received ``(name, value)`` pairs as :data:`ReceivedHeaders` (names lower-cased)."""
    found: dict[str, list[str]] = {}
    for name, value in fields:
        found.setdefault(name.lower(), []).append(value)
    return found


class _Check:
    """One request's headers against its body."""

    def __init__(self, received: ReceivedHeaders, message: Mapping[str, Any]) -> None:
        self.received = received
        self.is_request = "id" in message
        rid = message.get("id")
        self.request_id = rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None

    def fail(self, kind: type[HeaderMismatch], message: str, header: str) -> HeaderMismatch:
        return kind(message, header=header, request_id=self.request_id)

    def single(self, header: str) -> str | None:
        values = self.received.get(header.lower(), ())
        if len(values) > 1:
            raise self.fail(RepeatedHeader, f"more than one {header} header", header)
        return values[0] if values else None

    def mirror(self, header: str, body_value: Any, *, encoded: bool) -> None:
        """A standard header: required on a request whose body has the value, equal to it."""
        raw = self.single(header)
        if raw is None:
            if self.is_request and isinstance(body_value, str):
                raise self.fail(MissingHeader, f"the {header} header is missing", header)
            return
        value = decode_header_value(raw) if encoded else raw
        if value is None:
            raise self.fail(
                MalformedHeader, f"malformed {header} header value {describe(raw)}", header
            )
        if value != body_value:
            raise self.fail(
                HeaderMismatch,
                f"{header} header value {describe(value)} does not match body value "
                f"{describe(body_value)}",
                header,
            )

    def param(self, name: str, path: Sequence[str], arguments: Any) -> None:
        """One ``Mcp-Param-*`` header against the argument it mirrors."""
        header = Header.PARAM_PREFIX + name
        where = ".".join(path)
        value = _value_at(arguments, path)
        raw = self.single(header)
        if value is None:
            if raw is not None:
                raise self.fail(
                    HeaderMismatch,
                    f"{header} header given, but the arguments have no {describe(where)}",
                    header,
                )
            return
        if raw is None:
            raise self.fail(
                MissingHeader,
                f"the {header} header is missing for argument {describe(where)}",
                header,
            )
        decoded = decode_header_value(raw)
        if decoded is None:
            raise self.fail(
                MalformedHeader, f"malformed {header} header value {describe(raw)}", header
            )
        if not header_matches(decoded, value):
            raise self.fail(
                HeaderMismatch,
                f"{header} header value {describe(decoded)} does not match argument "
                f"{describe(where)} = {describe(value)}",
                header,
            )


def check_request_headers(
    received: ReceivedHeaders,
    message: Mapping[str, Any],
    *,
    header_params: HeaderParams | None = None,
) -> None:
    """Check the headers of a POST against the message in its body.

    ``received`` maps lower-case header names to their values (see
    :func:`header_fields`); ``header_params`` are those of the tool a
    ``tools/call`` calls.  A header that mirrors one value must come at most
    once.  ``Mcp-Method`` must equal ``method``; ``MCP-Protocol-Version`` the
    ``_meta`` version (when the body has one: without it the request is
    invalid anyway); ``Mcp-Name`` the name or URI, after decoding.  On a
    request (not a notification) the headers for values the body has are
    required.  Each ``Mcp-Param-*`` header must be there, well-formed and equal
    to its argument when the argument is present and not null, and absent
    otherwise.

    Raises :class:`MissingHeader`, :class:`MalformedHeader`,
    :class:`RepeatedHeader` or :class:`HeaderMismatch` (all -32020, carrying
    the request's id).  A message without a string ``method`` is not checked.
    """
    method = message.get("method")
    if not isinstance(method, str):
        return
    check = _Check(received, message)
    params = _params_of(message)
    check.mirror(Header.METHOD, method, encoded=False)
    version = _body_version(params)
    if isinstance(version, str):
        check.mirror(Header.PROTOCOL_VERSION, version, encoded=False)
    else:
        check.single(Header.PROTOCOL_VERSION)
    field = NAME_FIELDS.get(method)
    if field is not None:
        check.mirror(Header.NAME, params.get(field), encoded=True)
    if method == "tools/call" and header_params:
        arguments = params.get("arguments")
        for name, path in header_params.items():
            check.param(name, path, arguments)


def accepted_media(accept_values: Sequence[str]) -> tuple[bool, bool]:
    """What a request's ``Accept`` values take: (``application/json``,
    ``text/event-stream``), wildcards included; no ``Accept`` takes both.  A media
    range with ``q=0`` (or a ``q`` that is not a positive number) is refused."""
    if not accept_values:
        return True, True
    json_ok = sse_ok = False
    for value in accept_values:
        for item in value.split(","):
            media, *parameters = (part.strip() for part in item.split(";"))
            quality = 1.0
            for parameter in parameters:
                key, _, raw = parameter.partition("=")
                if key.strip().lower() == "q":
                    try:
                        quality = float(raw)
                    except ValueError:
                        quality = 0.0
            if not quality > 0:  # (also NaN)
                continue
            media = media.lower()
            json_ok = json_ok or media in ("application/json", "application/*", "*/*")
            sse_ok = sse_ok or media in ("text/event-stream", "text/*", "*/*")
    return json_ok, sse_ok
