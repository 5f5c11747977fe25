"""The schemas target: a client's answers and arguments checked against real schemas,
and the server's ask builders fed arbitrary form fields and URLs."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

import jsonschema_rs

import mrtr_core as m

from ._common import STDLIB, guarded

#: Schemas a server really writes: a form's ``requestedSchema`` (every field kind the
#: spec allows) and tools' ``inputSchema``s (formats, nesting, arrays, a dialect).
FORM = m.server.elicit_form(
    "Your details",
    {
        "name": {"type": "string", "minLength": 1, "maxLength": 20, "title": "Name"},
        "email": {"type": "string", "format": "email"},
        "born": {"type": "string", "format": "date"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "score": {"type": "number", "minimum": -1.5},
        "ok": {"type": "boolean", "default": False},
        "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["S", "M", "L"]},
        "tone": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2},
        "picks": {"type": "array", "items": {"anyOf": [{"const": "p", "title": "P"}]}},
    },
    required=["name", "email"],
)
SCHEMAS: tuple[dict[str, Any], ...] = (
    dict(FORM.requested_schema),
    {
        "type": "object",
        "properties": {
            "region": {"type": "string", "pattern": "^[a-z]+-[0-9]$"},
            "when": {"type": "string", "format": "date-time"},
            "home": {"type": "string", "format": "uri"},
            "deep": {
                "type": "object",
                "properties": {"n": {"type": "array", "items": {"type": "integer"}}},
                "required": ["n"],
                "additionalProperties": False,
            },
        },
        "required": ["region"],
        "additionalProperties": False,
    },
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "number", "minimum": 3}]}},
        "definitions": {"leaf": {"type": "boolean"}},
        "additionalProperties": {"$ref": "#/definitions/leaf"},
    },
    {"type": "array", "items": {"type": "object"}, "minItems": 1, "uniqueItems": True},
)

_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_INTEGER = {"type": "integer"}
_TITLED = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"const": _STRING, "title": _STRING},
        "required": ["const", "title"],
    },
}


def _field(kind: Any, required: tuple[str, ...] = (), **more: Any) -> dict[str, Any]:
    properties = {"type": kind, "title": _STRING, "description": _STRING, **more}
    return {
        "type": "object",
        "properties": properties,
        "required": ["type", *required],
        "additionalProperties": False,
    }


#: The shape the spec (schema 2026-07-28) gives ``ElicitRequestFormParams.requestedSchema``
#: and its ``PrimitiveSchemaDefinition``s, written out here for the check (draft 2020-12):
#: what the form builder accepts must be one of these.  ``additionalProperties: false`` is
#: ours: the builder promises no keyword beyond the spec's.
SPEC_FORM_SHAPE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"const": "object"},
        "properties": {
            "type": "object",
            "additionalProperties": {
                "anyOf": [
                    _field(
                        {"const": "string"},
                        default=_STRING,
                        minLength=_INTEGER,
                        maxLength=_INTEGER,
                        format={"enum": ["date", "date-time", "email", "uri"]},
                    ),
                    _field(
                        {"enum": ["integer", "number"]},
                        default={"type": "number"},
                        minimum={"type": "number"},
                        maximum={"type": "number"},
                    ),
                    _field({"const": "boolean"}, default={"type": "boolean"}),
                    _field({"const": "string"}, ("enum",), default=_STRING, enum=_STRINGS),
                    _field({"const": "string"}, ("oneOf",), default=_STRING, oneOf=_TITLED),
                    _field(
                        {"const": "string"},
                        ("enum",),
                        default=_STRING,
                        enum=_STRINGS,
                        enumNames=_STRINGS,
                    ),
                    _field(
                        {"const": "array"},
                        ("items",),
                        default=_STRINGS,
                        minItems=_INTEGER,
                        maxItems=_INTEGER,
                        items={
                            "anyOf": [
                                {
                                    "type": "object",
                                    "properties": {"type": {"const": "string"}, "enum": _STRINGS},
                                    "required": ["type", "enum"],
                                    "additionalProperties": False,
                                },
                                {
                                    "type": "object",
                                    "properties": {"anyOf": _TITLED},
                                    "required": ["anyOf"],
                                    "additionalProperties": False,
                                },
                            ]
                        },
                    ),
                ]
            },
        },
        "required": _STRINGS,
    },
    "required": ["type", "properties"],
    "additionalProperties": False,
}
_SPEC_FORM = jsonschema_rs.validator_for(SPEC_FORM_SHAPE)


def _check_problem(schema: dict[str, Any], value: Any) -> None:
    problem = m.server._validation.schema_problem(schema, value)
    if problem is not None:
        assert isinstance(problem, m.server._validation.SchemaProblem), problem
        assert problem.field == "" or problem.field.startswith("/"), problem
        assert isinstance(problem.reason, str) and problem.reason, problem


def _check_answer(value: Any, *, proven: bool) -> None:
    """``value`` as the client's answer to ``FORM``: a typed answer whose accepted
    content matches the form, or ``InvalidAnswer``; nothing else."""
    params = {"inputResponses": {"k": value}}
    try:
        answers = m.server.Answers(params, proven={"k": "elicitation/create"} if proven else None)
        answer = answers.get("k", FORM)
    except m.server.InvalidAnswer:
        return
    assert answer is None or isinstance(answer, m.wire.ElicitResult), answer
    if answer is not None and answer.action == "accept":
        content = answer.content if answer.content is not None else {}
        assert m.server._validation.schema_problem(FORM.requested_schema, content) is None, content
    assert ("k" in answers.unproven) == (answer is not None and not proven)


def _check_form_builder(value: Any) -> None:
    """The form builder fed arbitrary fields: ``LocalProtocolError``, or a request the
    spec's form shape accepts."""
    properties = value.get("properties", value) if isinstance(value, dict) else value
    required = value.get("required", ()) if isinstance(value, dict) else ()
    if not isinstance(required, list):
        required = ()
    try:
        request = m.server.elicit_form("m", properties, required=required)
    except m.LocalProtocolError:
        return
    schema = request.requested_schema
    errors = [e.message for e in _SPEC_FORM.iter_errors(schema)]
    assert not errors, (schema, errors[:3])
    wire = m.wire._convert.unstructure_input_request(request)
    assert wire["params"]["requestedSchema"] == schema, wire


def _check_url_builder(url: Any) -> None:
    """The URL builder: ``LocalProtocolError``, or an absolute https (or loopback http)
    URL with a host, no credentials, no spaces or control characters."""
    try:
        request = m.server.elicit_url("m", url)
    except m.LocalProtocolError:
        return
    assert request.url == url and isinstance(url, str)
    assert not any(ord(c) <= 0x20 or c == "\x7f" for c in url), url
    parts = urlsplit(url)
    assert parts.scheme.lower() in ("https", "http") and parts.hostname, url
    assert parts.username is None and parts.password is None, url
    if parts.scheme.lower() == "http":
        host = parts.hostname
        assert host == "localhost" or host.endswith(".localhost") or _loopback(host), url


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def schemas(data: bytes) -> None:
    """JSON from a client checked against real schemas; arbitrary fields and URLs fed
    to the ask builders.  Only documented errors; each checks what it promises.

    Control byte ``data[0]``: 0x01 the rest is a form field set for ``elicit_form``
    (an object, or ``{"properties": ..., "required": [...]}``), 0x02 a URL for
    ``elicit_url`` (the JSON string, or the raw text when it is not JSON); else the
    rest is a value checked against every schema in ``SCHEMAS`` and read as an
    answer to the form (0x04: as a proven answer).  The rest is one JSON value.
    """
    if len(data) < 1:
        return
    control, body = data[0], data[1:]
    value = guarded(lambda: STDLIB.loads(body))
    if control & 0x01:
        _check_form_builder(value)
    elif control & 0x02:
        text = value if isinstance(value, str) else body.decode("utf-8", "replace")
        _check_url_builder(text)
    else:
        for schema in SCHEMAS:
            _check_problem(schema, value)
        _check_answer(value, proven=bool(control & 0x04))
