"""Answers the engine takes: the typed class of the request's kind (the fast check),
a subclass of it, a mapping that structures into it; anything else is refused."""

from __future__ import annotations

import attrs
import pytest

from mrtr_core import LocalProtocolError
from mrtr_core.engine import DispatchInput, RoundEngine, SendRetry
from mrtr_core.engine._rounds import answer_problem
from mrtr_core.wire import ElicitFormRequest, ElicitResult
from mrtr_core.wire._inputs import INPUT_KINDS

FORM = {
    "method": "elicitation/create",
    "params": {"message": "Sure?", "requestedSchema": {"type": "object"}},
}
PARAMS = {
    "name": "t",
    "_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
}


@attrs.frozen(kw_only=True)
class NotedResult(ElicitResult):
    """An app's own subclass of the answer class."""


def _engine_waiting() -> tuple[RoundEngine, str]:
    engine = RoundEngine("tools/call", PARAMS)
    engine.start(0.0)
    engine.next_event()
    engine.receive_result(
        {"resultType": "input_required", "inputRequests": {"ok": FORM}, "requestState": "s"}, 0.0
    )
    while not isinstance(event := engine.next_event(), DispatchInput):
        pass
    return engine, event.key


def test_answer_problem_accepts_the_kinds_answer_class() -> None:
    request = ElicitFormRequest(message="m", requested_schema={})
    assert answer_problem("k", request, ElicitResult(action="accept"), INPUT_KINDS) is None
    assert answer_problem("k", request, NotedResult(action="decline"), INPUT_KINDS) is None
    problem = answer_problem("k", request, object(), INPUT_KINDS)  # type: ignore[arg-type]
    assert problem is not None and "must be a ElicitResult" in problem


@pytest.mark.parametrize(
    "answer",
    [
        ElicitResult(action="accept", content={"a": 1}),
        NotedResult(action="accept", content={"a": 1}),
        {"action": "accept", "content": {"a": 1}},
    ],
)
def test_the_engine_takes_the_answer_class_a_subclass_or_a_mapping(answer: object) -> None:
    engine, key = _engine_waiting()
    engine.provide(key, answer, 0.1)  # type: ignore[arg-type]
    retry = engine.next_event()
    assert isinstance(retry, SendRetry)
    assert retry.params["inputResponses"] == {"ok": {"action": "accept", "content": {"a": 1}}}
    assert retry.params["requestState"] == "s"


def test_the_engine_refuses_another_class() -> None:
    engine, key = _engine_waiting()
    with pytest.raises(LocalProtocolError, match="must be a ElicitResult"):
        engine.provide(key, object(), 0.1)  # type: ignore[arg-type]
