"""A server's odd values reach the engine's error messages only through ``describe``.

Reproductions of issue 11: a value nested about a thousand deep (orjson parses
1024 levels; the standard library as deep as the stack allows) as an unknown
``resultType``, an input request's ``method`` or its ``mode`` made the engine's
``repr`` raise ``RecursionError``.  Each is built for both JSON backends, parsed
the way a transport parses a body, and fed from a stack as deep as an app's
(100 frames more than the parse): the flow fails with ``InvalidInputRequired``
and a short message.  Each test also checks that its values are ones whose
``repr`` fails at that stack, so it shows what it claims to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

import mrtr_core as m

T = TypeVar("T")
BACKENDS = ("stdlib", "orjson")
APP_STACK = 100  # frames between the transport's parse and the engine's input


def nested_text(depth: int) -> bytes:
    return b"[" * depth + b"0" + b"]" * depth


def nested_list(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def at_stack_depth(frames: int, action: Callable[[], T]) -> T:
    """``action()`` called ``frames`` Python frames below here."""
    return action() if frames == 0 else at_stack_depth(frames - 1, action)


def repr_fails_there(value: Any) -> bool:
    try:
        at_stack_depth(APP_STACK, lambda: repr(value))
    except RecursionError:
        return True
    return False


def deep_values(backend: str, template: bytes) -> Iterator[Any]:
    """``template`` with ``%s`` a list nested 600..1100 deep, as ``backend`` parses it
    (with the depth bound out of the way); depths the backend refuses are skipped."""
    codec = m.wire.Codec(backend, max_depth=10_000)  # type: ignore[arg-type]
    for depth in range(600, 1100, 10):
        try:
            yield codec.loads(template % nested_text(depth))
        except m.RemoteProtocolError:
            continue  # deeper than this backend parses here: a parse error, as it should


FORM_ROUND = {
    "resultType": "input_required",
    "inputRequests": {
        "k": {
            "method": "elicitation/create",
            "params": {"message": "?", "requestedSchema": {"type": "object"}},
        }
    },
}


def started() -> m.engine.RoundEngine:
    engine = m.engine.RoundEngine(
        "tools/call", {"name": "t"}, capabilities={"elicitation": {"form": {}, "url": {}}}
    )
    engine.start(0.0)
    assert isinstance(engine.next_event(), m.engine.SendRequest)
    return engine


def failure_of(result: Any) -> m.engine.InvalidInputRequired:
    engine = started()
    at_stack_depth(APP_STACK, lambda: engine.receive_result(result, 1.0))
    event = engine.next_event()
    assert isinstance(event, m.engine.Failed), event
    assert isinstance(event.error, m.engine.InvalidInputRequired)
    assert len(event.error.message) < 300
    return event.error


def check(backend: str, template: bytes, pick: Callable[[Any], Any], expected: str) -> None:
    risky = 0
    for result in deep_values(backend, template):
        assert failure_of(result).message == expected
        risky += repr_fails_there(pick(result))
    assert risky, "no value deep enough to have broken repr: the test shows nothing"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unknown_deep_result_type_fails_the_flow_with_a_short_message(backend: str) -> None:
    check(
        backend,
        b'{"resultType":%s}',
        lambda result: result["resultType"],
        "unknown resultType list [[[…]]]",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deep_input_request_method_fails_the_flow_with_a_short_message(backend: str) -> None:
    check(
        backend,
        b'{"resultType":"input_required","inputRequests":{"k":{"method":%s}}}',
        lambda result: result["inputRequests"]["k"]["method"],
        "input request 'k' (list [[[…]]]): unknown input request method list [[[…]]]",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deep_elicitation_mode_fails_the_flow_with_a_short_message(backend: str) -> None:
    check(
        backend,
        b'{"resultType":"input_required","inputRequests":'
        b'{"k":{"method":"elicitation/create","params":{"mode":%s}}}}',
        lambda result: result["inputRequests"]["k"]["params"]["mode"],
        "input request 'k' ('elicitation/create'): unknown elicitation mode list [[[…]]]",
    )


def test_values_deeper_than_any_parser_goes_fail_the_flow_the_same_way() -> None:
    # An app can hand the engine any mapping: no parser bounded these.
    deep = nested_list(100_000)
    assert failure_of({"resultType": deep}).message == "unknown resultType list [[[…]]]"
    error = failure_of({"resultType": "input_required", "inputRequests": {"k": {"method": deep}}})
    assert error.key == "k" and error.method is None


def test_a_huge_key_or_method_is_cut_in_the_message() -> None:
    key = "k" * 1_000_000
    error = failure_of(
        {"resultType": "input_required", "inputRequests": {key: {"method": "x" * 1_000_000}}}
    )
    assert error.key == key  # the fields keep the value; only the message is cut
    assert error.message.startswith("input request '" + "k" * 40 + "'… ('" + "x" * 40 + "'…)")


@pytest.mark.parametrize("misuse", ["provide", "fail"])
def test_an_unhashable_key_is_misuse_with_a_short_message(misuse: str) -> None:
    engine = started()
    engine.receive_result(FORM_ROUND, 1.0)
    deep = nested_list(100_000)
    with pytest.raises(m.LocalProtocolError) as info:  # not a TypeError
        if misuse == "provide":
            engine.provide(deep, {"action": "accept"}, 2.0)
        else:
            engine.fail(deep, "no")
    assert info.value.message == "list [[[…]]] is not an input request waiting for an answer"


def test_misuse_messages_show_the_apps_values_bounded_too() -> None:
    with pytest.raises(m.LocalProtocolError, match="max_rounds must be a non-negative int, got"):
        m.engine.RoundEngine("tools/call", {}, max_rounds=nested_list(100_000))
    with pytest.raises(m.LocalProtocolError, match="unknown snapshot version list"):
        m.engine.RoundEngine.restore({"version": nested_list(100_000)}, 0.0)
