"""An answer is typed by its ask: what a type checker is told is what the core does.

``Answers.get`` and ``HandlerContext.answer`` read an ``elicit_form``/``elicit_url`` ask
as ``ElicitResult | None``, a ``sample`` as ``CreateMessageResult | None`` and
``list_roots`` as ``ListRootsResult | None``.  Each test reads real answers and states
their types with ``typing.assert_type``; the last one runs ``mypy --strict`` on this
file, so those statements are checked, not only run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, assert_type

from support.typecheck import mypy_errors

import mrtr_core as m
from mrtr_core.server import Answers, HandlerContext, elicit_form, elicit_url, list_roots, sample
from mrtr_core.wire import (
    CreateMessageResult,
    ElicitResult,
    InputRequest,
    InputResponse,
    ListRootsResult,
)
from mrtr_core.wire._inputs import INPUT_KINDS

FORM = elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])
SIGN_IN = elicit_url("Sign in", "https://example.com/sign-in")
POEM = sample("A line about rain", max_tokens=40)
ROOTS = list_roots()
PARAMS: dict[str, Any] = {
    "name": "introduce",
    "arguments": {},
    "inputResponses": {
        "form": {"action": "accept", "content": {"name": "Ada"}},
        "sign_in": {"action": "decline"},
        "poem": {"role": "assistant", "content": {"type": "text", "text": "rain"}, "model": "m"},
        "roots": {"roots": [{"uri": "file:///home/ada"}]},
    },
}


def test_an_elicitation_is_answered_by_an_elicit_result() -> None:
    answers = Answers(PARAMS)
    form = answers.get("form", FORM)
    assert_type(form, ElicitResult | None)
    assert form is not None and form.action == "accept" and form.content == {"name": "Ada"}
    url = answers.get("sign_in", SIGN_IN)
    assert_type(url, ElicitResult | None)
    assert url is not None and url.action == "decline"


def test_a_sample_and_a_roots_list_are_answered_by_their_results() -> None:
    answers = Answers(PARAMS)
    poem = answers.get("poem", POEM)
    assert_type(poem, CreateMessageResult | None)
    assert poem is not None and poem.model == "m" and poem.content["text"] == "rain"
    roots = answers.get("roots", ROOTS)
    assert_type(roots, ListRootsResult | None)
    assert roots is not None and [root.uri for root in roots.roots] == ["file:///home/ada"]


def test_an_ask_of_no_known_kind_reads_as_any_answer() -> None:
    asked: InputRequest = POEM  # e.g. one of a mapping of asks
    answer = Answers(PARAMS).get("poem", asked)
    assert_type(answer, InputResponse | None)
    assert isinstance(answer, CreateMessageResult)
    assert Answers(None).get("poem", POEM) is None  # not answered: ask again


def test_a_handlers_context_reads_the_same_types() -> None:
    seen: list[object] = []

    def handler(ctx: HandlerContext) -> dict[str, Any]:
        form = ctx.answer("form", FORM)
        assert_type(form, ElicitResult | None)
        poem = ctx.answer("poem", POEM)
        assert_type(poem, CreateMessageResult | None)
        roots = ctx.answer("roots", ROOTS)
        assert_type(roots, ListRootsResult | None)
        seen.extend([form, poem, roots])
        return {"content": []}

    info = m.server.RequestInfo(
        id=1,
        method="tools/call",
        era="modern",
        protocol_version="2026-07-28",
        capabilities={"elicitation": {}, "sampling": {}, "roots": {}},
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )
    request = m.Request(id=1, method="tools/call", params=PARAMS)
    m.server.run_handler(handler, request, info, sealer=None, principal=None, now=0.0)
    assert [type(answer) for answer in seen] == [ElicitResult, CreateMessageResult, ListRootsResult]


def test_the_types_are_the_pairing_of_the_input_kinds() -> None:
    """One rule, two homes kept equal: the overloads and ``INPUT_KINDS``."""
    typed: list[tuple[InputRequest, type[InputResponse]]] = [
        (FORM, ElicitResult),
        (SIGN_IN, ElicitResult),
        (POEM, CreateMessageResult),
        (ROOTS, ListRootsResult),
    ]
    for asked, answer in typed:
        assert INPUT_KINDS.kind_for(asked).response_class is answer, asked


def test_mypy_strict_checks_these_types(tmp_path: Path) -> None:
    assert mypy_errors([Path(__file__)], "--strict", cwd=tmp_path) == []
