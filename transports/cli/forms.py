"""Elicitation forms: reading a requested schema's fields, checking and parsing values.

Shared by the answers book (an accepted form answer is checked against the
requested schema before it is sent: :func:`check_form_answer`) and the
terminal prompts (each typed field is parsed and checked:
:func:`parse_field`, :func:`check_value`).  Values are checked by the core's
JSON-Schema validator (jsonschema-rs, formats asserted), the one the server
checks them with; a schema it cannot use is left to the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mrtr_core as m

__all__ = [
    "FormAnswerError",
    "check_form_answer",
    "check_value",
    "choices",
    "form_fields",
    "parse_field",
]


class FormAnswerError(ValueError):
    """A form answer that does not fit the requested schema; the message says why."""


def form_fields(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    """``(name, property schema, required)`` for each field, in the schema's order."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    return [
        (str(name), prop if isinstance(prop, Mapping) else {}, name in needed)
        for name, prop in properties.items()
    ]


def choices(prop: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """``(value, label)`` options of a single- or multi-select field, or ``None``."""
    source: Mapping[str, Any] = prop
    if prop.get("type") == "array" and isinstance(prop.get("items"), Mapping):
        source = prop["items"]
    if isinstance(source.get("enum"), list):
        names = source.get("enumNames", prop.get("enumNames"))
        labels = names if isinstance(names, list) and len(names) == len(source["enum"]) else None
        return [
            (value, str(labels[i]) if labels else str(value))
            for i, value in enumerate(source["enum"])
        ]
    for keyword in ("oneOf", "anyOf"):
        options = source.get(keyword)
        if isinstance(options, list) and all(
            isinstance(o, Mapping) and "const" in o for o in options
        ):
            return [(o["const"], str(o.get("title", o["const"]))) for o in options]
    return None


def check_value(prop: Mapping[str, Any], value: Any) -> str | None:
    """Why ``value`` does not fit the field's schema, or ``None`` when it does.

    The check is the core's, the one JSON-Schema validator
    (:func:`mrtr_core.server._validation.schema_problem`), so a value it passes is one the server
    accepts; its reason is shown as it is, except for a single-select field, where the
    options a person can type are more use than the schema's wording.
    """
    try:
        problem = m.server._validation.schema_problem(prop, value)
    except m.LocalProtocolError:
        return None  # not a schema the validator can use: the server judges the value
    if problem is None:
        return None
    options = choices(prop)
    if options is not None and prop.get("type") != "array":
        return f"choose one of: {', '.join(label for _, label in options)}"
    return problem.reason  # (a field is flat: the reason names the item it is about)


def check_form_answer(schema: Mapping[str, Any], answer: m.wire.ElicitResult) -> None:
    """An accepted form answer must fill the required fields with values that fit."""
    if answer.action != "accept":
        if answer.content is not None:
            raise FormAnswerError(f"a {answer.action} answer carries no content")
        return
    content = answer.content or {}
    for name, prop, required in form_fields(schema):
        if name not in content:
            if required:
                raise FormAnswerError(f"the required field {name!r} is missing")
            continue
        problem = check_value(prop, content[name])
        if problem is not None:
            raise FormAnswerError(f"field {name!r}: {problem}")


def parse_field(prop: Mapping[str, Any], text: str) -> Any:
    """What the user typed for a field, as its JSON value; ``ValueError`` says why not."""
    kind = prop.get("type")
    options = choices(prop)
    text = text.strip()
    if kind == "array":
        picks = [part.strip() for part in text.split(",") if part.strip()]
        return [_pick(options, part) if options else part for part in picks]
    if options is not None:
        return _pick(options, text)
    if kind == "boolean":
        lowered = text.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer y or n")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected a whole number") from None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
        return (
            int(number) if number.is_integer() and "." not in text and "e" not in text else number
        )
    return text


def _pick(options: list[tuple[Any, str]] | None, text: str) -> Any:
    assert options is not None
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    for value, label in options:
        if text in (str(value), label):
            return value
    raise ValueError(f"choose a number from 1 to {len(options)}")
