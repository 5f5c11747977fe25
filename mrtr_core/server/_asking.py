"""The server's side of a round: typed asks, capability gating, reading the answers.

::

    result = input_required(
        {"city": elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])},
        state=sealer.seal(...),
    )

Each helper returns the typed input request of ``mrtr_core``'s wire model; the
builder checks the rules a result must obey and returns the plain wire mapping
to send as the result.  ``required_capabilities`` says what a request must have
declared before it may be asked something (never ask beyond it: raise
:class:`CapabilityRequired`, -32021, when the handler cannot do without), and
:class:`Answers` reads a retry's ``inputResponses`` against what was asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import (
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
)
from ..protocol._capabilities import missing_capability
from ..wire._convert import structure, unstructure_input_required
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import (
    CreateMessageRequest,
    ElicitFormRequest,
    ElicitUrlRequest,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
)


def elicit_form(
    message: str, properties: Mapping[str, Any], *, required: Iterable[str] = ()
) -> ElicitFormRequest:
    """Ask the user to fill in a form: ``properties`` are JSON Schema primitives by name."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    needed = list(required)
    unknown = [name for name in needed if name not in schema["properties"]]
    if unknown:
        raise LocalProtocolError(f"required fields {unknown} are not among the properties")
    if needed:
        schema["required"] = needed
    return ElicitFormRequest(message=message, requested_schema=schema)


def elicit_url(message: str, url: str) -> ElicitUrlRequest:
    """Ask the user to visit ``url`` (needs the client's ``elicitation.url`` capability)."""
    return ElicitUrlRequest(message=message, url=url, mode="url")


def sample(
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None = None,
    **options: Any,
) -> CreateMessageRequest:
    """Ask the client's LLM: a one-line user ``prompt`` or a list of sampling messages.

    ``options`` are the other ``CreateMessageRequest`` fields (``temperature``,
    ``tools``, ``tool_choice``, ...).
    """
    if isinstance(prompt, str):
        messages: list[Any] = [{"role": "user", "content": {"type": "text", "text": prompt}}]
    else:
        messages = [dict(m) for m in prompt]
    return CreateMessageRequest(
        messages=messages, max_tokens=max_tokens, system_prompt=system_prompt, **options
    )


def list_roots() -> ListRootsRequest:
    """Ask for the client's roots (needs the ``roots`` capability)."""
    return ListRootsRequest()


def input_required(
    requests: Mapping[str, InputRequest] | None = None,
    *,
    state: str | None = None,
    input_kinds: InputRegistry = INPUT_KINDS,
) -> dict[str, Any]:
    """The wire result asking for ``requests`` (by key) and/or carrying ``state``.

    At least one of the two is needed; an empty ``requests`` counts as none.
    Every request must be of a kind in ``input_kinds``.
    """
    asks = dict(requests or {})
    for key, request in asks.items():
        if not isinstance(key, str):
            raise LocalProtocolError(f"input request keys are strings, not {key!r}")
        if input_kinds.kind_of(request) is None:
            raise LocalProtocolError(
                f"{key!r}: {type(request).__name__} is not an input request "
                "(use elicit_form, elicit_url, sample or list_roots)"
            )
    if state is not None and not isinstance(state, str):
        raise LocalProtocolError("state must be a string (seal it first)")
    if not asks and state is None:
        raise LocalProtocolError("input_required needs input requests or a state")
    result = InputRequiredResult(input_requests=asks or None, request_state=state)
    return unstructure_input_required(result)


class CapabilityRequired(MrtrError):
    """-32021: the handler cannot proceed without input the request did not declare.

    ``data = {"requiredCapabilities": {...}}``, the ``ClientCapabilities``
    fragment that was missing.
    """

    code = MISSING_CLIENT_CAPABILITY

    def __init__(self, required: Mapping[str, Any]) -> None:
        super().__init__(
            "the request did not declare the capabilities this input needs",
            data={"requiredCapabilities": dict(required)},
        )
        self.required = dict(required)


def required_capabilities(
    requests: Mapping[str, InputRequest],
    capabilities: Mapping[str, Any],
    input_kinds: InputRegistry = INPUT_KINDS,
) -> dict[str, Any]:
    """The ``ClientCapabilities`` fragment ``requests`` need beyond ``capabilities``
    (empty when every one may be asked)."""
    required: dict[str, Any] = {}
    for request in requests.values():
        for name, fragment in missing_capability(request, capabilities, input_kinds).items():
            required.setdefault(name, {}).update(fragment)
    return required


class InvalidAnswer(RemoteProtocolError):
    """-32602: an answer under ``key`` does not have the shape of what was asked.

    ``data = {"key": ..., "reason": ...}``.  Raised rather than asking again: a
    client that sent the wrong shape once would most likely send it again.
    """

    def __init__(self, key: str | None, reason: str) -> None:
        super().__init__(
            f"invalid inputResponses: {reason}",
            code=INVALID_PARAMS,
            data={"key": key, "reason": reason},
        )
        self.key = key


class Answers:
    """The ``inputResponses`` of one leg, read against what the server asked.

    A key the client did not answer is not an error: ask for it again
    (:meth:`missing`).  Keys nobody asked for are ignored.  ``input_kinds``
    says which answer class answers which request.
    """

    __slots__ = ("_input_kinds", "_raw")

    def __init__(
        self, params: Mapping[str, Any] | None, *, input_kinds: InputRegistry = INPUT_KINDS
    ) -> None:
        raw = (params or {}).get("inputResponses")
        if raw is None:
            raw = {}
        elif not isinstance(raw, Mapping):
            raise InvalidAnswer(None, "inputResponses must be an object")
        self._raw: Mapping[str, Any] = raw
        self._input_kinds = input_kinds

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` was answered (a ``null`` answer is no answer)."""
        return isinstance(key, str) and self._raw.get(key) is not None

    def get(self, key: str, asked: InputRequest) -> InputResponse | None:
        """The typed answer to ``asked`` under ``key``, or ``None`` if there is none."""
        raw = self._raw.get(key)
        if raw is None:
            return None
        expected = self._input_kinds.kind_for(asked).response_class
        try:
            answer: InputResponse = structure(raw, expected)
        except RemoteProtocolError as exc:
            raise InvalidAnswer(key, f"{key!r} is not a valid {expected.__name__}") from exc
        return answer

    def missing(self, asked: Mapping[str, InputRequest]) -> dict[str, InputRequest]:
        """The asks among ``asked`` that this leg did not answer, to ask again."""
        return {key: request for key, request in asked.items() if self._raw.get(key) is None}
