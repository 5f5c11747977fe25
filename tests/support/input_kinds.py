"""Input kinds for registry tests: a wire sample of every standard kind, and a new kind.

``SAMPLE_REQUESTS`` / ``SAMPLE_ANSWERS`` hold, by kind name, one ``{method, params}``
input request and one answer of every kind in ``INPUT_KINDS``; the tests check
that they cover the registry, so a kind added without samples fails loudly.

``CONFIRM`` is a kind the registry does not have (a yes/no confirmation, with a
``dangerous`` sub-capability for dangerous ones and a 2025-era id param), and
``WITH_CONFIRM`` the standard registry plus it: the tests use them to show
that one entry and its model classes are all a new kind takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from mrtr_core.wire._inputs import INPUT_KINDS, InputKind, InputRegistry

FORM_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

SAMPLE_REQUESTS: dict[str, dict[str, Any]] = {
    "elicitation/create": {
        "method": "elicitation/create",
        "params": {"message": "Which city?", "requestedSchema": FORM_SCHEMA, "_meta": {"x": 1}},
    },
    "elicitation/create#url": {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/login"},
    },
    "sampling/createMessage": {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}],
            "maxTokens": 5,
            "temperature": 0.5,
            "futureField": True,
        },
    },
    "roots/list": {"method": "roots/list", "params": {"_meta": {"trace": "t"}}},
}

SAMPLE_ANSWERS: dict[str, dict[str, Any]] = {
    "elicitation/create": {"action": "accept", "content": {"city": "Oslo"}},
    "elicitation/create#url": {"action": "accept"},
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "Hello"},
        "model": "m",
        "stopReason": "endTurn",
    },
    "roots/list": {"roots": [{"uri": "file:///home/ada", "name": "home"}], "_meta": {}},
}

assert set(SAMPLE_REQUESTS) == set(SAMPLE_ANSWERS)


@attrs.frozen(kw_only=True)
class ConfirmRequest:
    """``confirmation/ask``: a yes/no question (``danger`` for a dangerous one)."""

    method = "confirmation/ask"
    message: str
    danger: bool = False
    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class ConfirmResult:
    """The answer to ``confirmation/ask``."""

    confirmed: bool
    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


def _confirm_needs(params: Mapping[str, Any]) -> Iterable[str]:
    return ("dangerous",) if params.get("danger") else ()


CONFIRM = InputKind(
    name="confirmation/ask",
    method="confirmation/ask",
    request_class=ConfirmRequest,
    response_class=ConfirmResult,
    capability="confirmation",
    param_needs=_confirm_needs,
    legacy_method="confirmation/ask",
    legacy_id_param="confirmationId",
)

WITH_CONFIRM = InputRegistry(kinds=(*INPUT_KINDS.kinds, CONFIRM))
