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
from typing import Any, overload

from .._errors import (
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
    describe,
)
from ..wire._capabilities import missing_capability
from ..wire._convert import structure, unstructure_input_required
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
)
from ._ask_rules import check_elicitation_url, check_primitive_schema
from ._plain import plain_elicit_result, plain_form_wire
from ._validation import compile_schema


def elicit_form(
    message: str, properties: Mapping[str, Any], *, required: Iterable[str] = ()
) -> ElicitFormRequest:
    """Ask the user to fill in a form: ``properties`` are JSON Schema primitives by name.

    Only what the spec's ``PrimitiveSchemaDefinition`` allows: a string (``minLength``,
    ``maxLength``, ``format`` email/uri/date/date-time), a number or integer
    (``minimum``, ``maximum``), a boolean, or an enum (``enum`` of strings, ``oneOf``
    of ``{const, title}``, or an array of either for a multi-select), each with
    ``title``, ``description`` and ``default``.  Anything else (a nested object, an
    array of objects, ``$ref``, another keyword) raises ``LocalProtocolError``.
    """
    if not isinstance(properties, Mapping):
        raise LocalProtocolError("properties must be a mapping of field name to schema")
    for name, definition in properties.items():
        check_primitive_schema(name, definition)
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    needed = list(required)
    if not all(isinstance(name, str) for name in needed):
        raise LocalProtocolError(f"required fields are named by strings, not {describe(needed)}")
    unknown = [name for name in needed if name not in schema["properties"]]
    if unknown:
        raise LocalProtocolError(f"required fields {unknown} are not among the properties")
    if needed:
        schema["required"] = needed
    compile_schema(schema)  # compiled (and cached) now: answers are checked against it
    return ElicitFormRequest(message=message, requested_schema=schema)


def elicit_url(message: str, url: str) -> ElicitUrlRequest:
    """Ask the user to visit ``url`` (needs the client's ``elicitation.url`` capability).

    ``url`` must be an absolute ``https:`` URL without credentials in it (``http:``
    only for a loopback host, for development); anything else, ``javascript:``,
    ``data:`` or ``file:`` included, raises ``LocalProtocolError``.
    """
    check_elicitation_url(url)
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
    if asks:
        # Plain form asks (the common case) are written without the converter.
        wire = {key: plain_form_wire(request) for key, request in asks.items()}
        if None not in wire.values():
            out: dict[str, Any] = {"resultType": "input_required", "inputRequests": wire}
            if state is not None:
                out["requestState"] = state
            return out
    result = InputRequiredResult(input_requests=asks or None, request_state=state)
    return unstructure_input_required(result)


class CapabilityRequired(MrtrError):
    """-32021: the handler cannot proceed without input the request did not declare.

    ``data = {"requiredCapabilities": {...}}``, the ``ClientCapabilities``
    fragment that was missing (an extension, such as tasks, included: ``message``
    then says which).
    """

    code = MISSING_CLIENT_CAPABILITY

    def __init__(
        self,
        required: Mapping[str, Any],
        message: str = "the request did not declare the capabilities this input needs",
    ) -> None:
        super().__init__(message, data={"requiredCapabilities": dict(required)})
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

    ``data = {"key": ..., "reason": ...}``, plus ``"field"`` (a JSON Pointer into the
    form's content, e.g. ``"/nights"``) when a form answer broke its
    ``requestedSchema``.  Raised rather than asking again: a client that sent the
    wrong shape once would most likely send it again.
    """

    def __init__(
        self, key: str | None, reason: str, *, field: str | None = None, message: str = ""
    ) -> None:
        data: dict[str, Any] = {"key": key, "reason": reason}
        if field is not None:
            data["field"] = field
        super().__init__(
            f"invalid inputResponses: {message or reason}", code=INVALID_PARAMS, data=data
        )
        self.key = key
        self.field = field


class UnprovenAnswer(InvalidAnswer):
    """-32602: a guarded side effect (``ctx.once``, the last step of ``Steps``) was
    reached after reading an answer that no ``requestState`` proves was asked.

    ``data = {"key": ..., "reason": "unproven"}``.  An answer is proven when the
    previous leg of this flow asked for that key, as the same kind of request, and
    sealed that in the ``requestState`` this leg brought back.  A client that sends
    answers nobody asked for can still drive a plain handler (the spec's stateless
    model), but never a guarded side effect.
    """

    def __init__(self, key: str) -> None:
        super().__init__(
            key,
            "unproven",
            message=f"no requestState of this flow proves that {key!r} was asked; "
            "a guarded side effect does not act on it",
        )


class Answers:
    """The ``inputResponses`` of one leg, read against what the server asked.

    A key the client did not answer is not an error: ask for it again
    (:meth:`missing`).  Keys nobody asked for are ignored.  ``input_kinds``
    says which answer class answers which request.

    ``proven`` maps each key the previous leg of this flow asked (as its sealed
    ``requestState`` proves) to the name of the input kind it asked with.  An answer
    read against a request of that same kind is proven; any other is not.  By
    default an unproven answer is still returned and its key recorded in
    :attr:`unproven` (guarded side effects refuse to run after one); with
    :attr:`require_proof` set it reads as no answer at all, so the handler asks again.
    """

    __slots__ = ("_input_kinds", "_proven", "_raw", "require_proof", "unproven")

    def __init__(
        self,
        params: Mapping[str, Any] | None,
        *,
        input_kinds: InputRegistry = INPUT_KINDS,
        proven: Mapping[str, str] | None = None,
    ) -> None:
        raw = (params or {}).get("inputResponses")
        if raw is None:
            raw = {}
        elif type(raw) is not dict and not isinstance(raw, Mapping):
            raise InvalidAnswer(None, "inputResponses must be an object")
        self._raw: Mapping[str, Any] = raw
        self._input_kinds = input_kinds
        self._proven: Mapping[str, str] = dict(proven or {})
        #: Read unproven answers as ``None`` (set by ``ctx.require_proof()``).
        self.require_proof = False
        #: The keys whose answers were read in this leg without proof.
        self.unproven: set[str] = set()

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` was answered (a ``null`` answer is no answer)."""
        return isinstance(key, str) and self._raw.get(key) is not None

    def is_proven(self, key: str, asked: InputRequest) -> bool:
        """Whether the previous leg asked ``key`` as a request of ``asked``'s kind."""
        return self._proven.get(key) == self._input_kinds.kind_for(asked).name

    # Typed by the ask: a form or URL elicitation is answered by an ElicitResult, a
    # sampling request by a CreateMessageResult, roots/list by a ListRootsResult (what
    # INPUT_KINDS pairs at run time), so a handler reads ``.action`` without isinstance.
    @overload
    def get(self, key: str, asked: ElicitFormRequest | ElicitUrlRequest) -> ElicitResult | None: ...
    @overload
    def get(self, key: str, asked: CreateMessageRequest) -> CreateMessageResult | None: ...
    @overload
    def get(self, key: str, asked: ListRootsRequest) -> ListRootsResult | None: ...
    @overload
    def get(self, key: str, asked: InputRequest) -> InputResponse | None: ...
    def get(self, key: str, asked: InputRequest) -> InputResponse | None:
        """The typed answer to ``asked`` under ``key``, or ``None`` if there is none.

        An accepted form answer is checked against ``asked``'s ``requestedSchema``:
        one that breaks it raises :class:`InvalidAnswer` naming the field.
        """
        raw = self._raw.get(key)
        if raw is None:
            return None
        kind = self._input_kinds.kind_for(asked)
        proven = self._proven.get(key) == kind.name  # (is_proven, with the kind at hand)
        if not proven and self.require_proof:
            return None
        expected = kind.response_class
        answer: InputResponse | None = None
        if expected is ElicitResult:
            answer = plain_elicit_result(raw)
        if answer is None:
            try:
                answer = structure(raw, expected)
            except RemoteProtocolError as exc:
                raise InvalidAnswer(key, f"{key!r} is not a valid {expected.__name__}") from exc
        if (
            isinstance(asked, ElicitFormRequest)
            and isinstance(answer, ElicitResult)
            and answer.action == "accept"
        ):
            content = answer.content if answer.content is not None else {}
            problem = compile_schema(asked.requested_schema).problem(content)
            if problem is not None:
                raise InvalidAnswer(key, problem.reason, field=problem.field)
        if not proven:
            self.unproven.add(key)
        return answer

    def missing(self, asked: Mapping[str, InputRequest]) -> dict[str, InputRequest]:
        """The asks among ``asked`` that this leg did not answer, to ask again
        (with :attr:`require_proof`, an unproven answer is no answer)."""
        return {
            key: request
            for key, request in asked.items()
            if self._raw.get(key) is None
            or (self.require_proof and not self.is_proven(key, request))
        }
