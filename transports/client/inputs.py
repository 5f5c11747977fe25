"""Input requests on the client side: the handler that answers them, and what an answer must be.

The model: which response answers which input request (an elicitation an
``ElicitResult``, sampling a ``CreateMessageResult``, ``roots/list`` a
``ListRootsResult``) is written once, in the core's input-kind registry
(``mrtr_core.wire.INPUT_KINDS``).  This module is the transports' one
reader of it: the client checks a handler's answer with
:func:`answer_problem`, and ``mrtr call`` reads an answers-book entry as
:func:`response_type_for` its kind.  Nothing else in the transports knows the
kinds.

:func:`answer_server_request` answers a 2025-era server's own requests (which
come as real JSON-RPC requests, not inside an ``input_required`` result)
through the same :class:`InputHandler`, the key being the request's method.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

import anyio

import mrtr_core as m
from mrtr_core.wire import INPUT_KINDS

from .errors import CallTimeout, ClientError, InputUnavailable

__all__ = [
    "INPUT_METHODS",
    "KIND_NAMES",
    "capability_of",
    "InputHandler",
    "answer_problem",
    "answer_server_request",
    "response_type",
    "response_type_for",
]

#: The methods of the input requests (what a 2025-era server may ask its client).
INPUT_METHODS: frozenset[str] = INPUT_KINDS.legacy_methods
#: The kinds' names (``elicitation/create``, ``elicitation/create#url``, ...), in order.
KIND_NAMES: tuple[str, ...] = tuple(kind.name for kind in INPUT_KINDS.kinds)


def capability_of(kind: str) -> str:
    """The capability a kind needs, by its most specific name (``form``, ``url``,
    ``sampling``, ``roots``)."""
    for entry in INPUT_KINDS.kinds:
        if entry.name == kind:
            return entry.sub_capability or entry.capability
    raise KeyError(f"no input request is of the kind {kind!r}")


class InputHandler(Protocol):
    """Answers one input request of a call (or a 2025-era server's request).

    ``key`` is the server's key for the request (in a 2025 session: the
    request's method).  Return the answer (``ElicitResult``,
    ``CreateMessageResult``, ``ListRootsResult``, or the same as a plain
    mapping); a declined or cancelled elicitation is an answer.  Raise
    :class:`~mrtr_transports.client.errors.InputUnavailable` when no answer can be
    given: the call then fails with it.  Handlers for the keys of one round run
    concurrently; a handler whose answer is no longer wanted is cancelled.
    """

    async def __call__(
        self, key: str, request: m.wire.InputRequest
    ) -> m.wire.InputResponse | Mapping[str, Any]: ...


def response_type(request: m.wire.InputRequest) -> type[Any]:
    """The response class that answers ``request``."""
    response: type[Any] = INPUT_KINDS.kind_for(request).response_class
    return response


def response_type_for(kind: str) -> type[Any]:
    """The response class that answers an input request of ``kind`` (its registry name:
    the method, with a ``#mode`` suffix for URL elicitation)."""
    for entry in INPUT_KINDS.kinds:
        if entry.name == kind:
            response: type[Any] = entry.response_class
            return response
    raise KeyError(f"no input request is of the kind {kind!r}")


def answer_problem(request: m.wire.InputRequest, answer: Any) -> str | None:
    """Why ``answer`` cannot go to the server as the answer to ``request`` (None: it can)."""
    expected = response_type(request)
    if isinstance(answer, Mapping):
        try:
            m.wire.structure(answer, expected)
        except m.MrtrError as exc:
            return f"the input handler's answer is not a valid {expected.__name__}: {exc}"
        return None
    if not isinstance(answer, expected):
        return (
            f"the input handler must answer {request.method} with a {expected.__name__}, "
            f"got {type(answer).__name__}"
        )
    return None


async def answer_server_request(
    request: m.Request,
    answer: InputHandler | None,
    capabilities: Mapping[str, Any],
    budget: float | None,
) -> tuple[m.ResultResponse | m.ErrorResponse, ClientError | None]:
    """A 2025-era server's own request (``elicitation/create``, ...), answered through
    ``answer`` under the key of its method, within ``budget`` seconds.

    Returns the response to send and, when no answer could be given, the error
    that ends the call the request belongs to (``None``: it was answered, or it
    was refused as a request this client does not serve).
    """

    def refuse(code: int, message: str) -> m.ErrorResponse:
        return m.ErrorResponse(id=request.id, error=m.ErrorObject(code=code, message=message))

    if request.method not in INPUT_METHODS:
        return refuse(
            m.ErrorCode.METHOD_NOT_FOUND, f"this client does not serve {request.method}"
        ), None
    try:
        asked = m.wire.structure_input_request(
            {"method": request.method, "params": request.params or {}}
        )
    except m.MrtrError as exc:
        return refuse(exc.code, f"cannot answer {request.method}: {exc.message}"), None
    if m.engine.missing_capability(asked, capabilities):
        message = f"this client did not declare support for {request.method}"
        return refuse(m.ErrorCode.INVALID_REQUEST, message), None
    key = request.method
    started = anyio.current_time()
    failure: ClientError | None = None
    response: Any = None
    try:
        if answer is None:
            raise InputUnavailable("this client has no input handler", key=key)
        with anyio.move_on_after(math.inf if budget is None else budget) as scope:
            response = await answer(key, asked)
        if scope.cancelled_caught:
            failure = CallTimeout(anyio.current_time() - started, budget, "input")
        elif (problem := answer_problem(asked, response)) is not None:
            failure = InputUnavailable(problem, key=key)
    except InputUnavailable as exc:
        failure = InputUnavailable(exc.reason, key=key)
    except Exception as exc:
        failure = InputUnavailable(f"the input handler failed: {exc!r}", key=key)
        failure.__cause__ = exc
    if failure is not None:
        return refuse(m.ErrorCode.INTERNAL_ERROR, f"no answer: {failure}"), failure
    result = m.wire._convert.unstructure_input_response(response)
    return m.ResultResponse(id=request.id, result=result), None
