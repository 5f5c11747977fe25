"""``params_digest`` on deep params: a documented ``LocalProtocolError``, never ``RecursionError``.

Issue 11: a ``tools/call`` whose arguments nest about a thousand deep (orjson
parses 1024 levels; the standard library as deep as the stack allows) made
``params_digest`` raise ``RecursionError`` from ``json.dumps``, which the HTTP
server turned into a 500 with a traceback.  Params nested deeper than 128 levels
(``DEFAULT_MAX_DEPTH``, which no message the default codec lets in can reach) are
now refused: ``open`` reports ``wrong_params``; ``seal`` raises ``LocalProtocolError``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from mrtr_core import LocalProtocolError, Request
from mrtr_core.server import InvalidRequestState, StateSealer
from mrtr_core.server._sealing import params_digest
from mrtr_core.wire import Codec
from mrtr_core.wire._depth import DEFAULT_MAX_DEPTH

BACKENDS = ("stdlib", "orjson")
KEY = b"k" * 32


def nested_text(depth: int) -> bytes:
    return b"[" * depth + b"0" + b"]" * depth


def nested_list(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def deep_tool_calls(backend: str) -> Iterator[Request]:
    """``tools/call`` requests with arguments nested 600..1100 deep, decoded by ``backend``
    with the codec's depth bound out of the way (what a server with ``max_depth`` raised,
    or one that decoded the body itself, would hand its app)."""
    codec = Codec(backend, max_depth=10_000)  # type: ignore[arg-type]
    for depth in range(600, 1100, 25):
        line = (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            b'"params":{"name":"t","arguments":{"a":%s}}}' % nested_text(depth)
        )
        try:
            message = codec.decode(line)
        except Exception:
            continue  # deeper than this backend parses: refused at the door
        assert isinstance(message, Request)
        yield message


@pytest.mark.parametrize("backend", BACKENDS)
def test_deep_tool_arguments_are_a_local_protocol_error(backend: str) -> None:
    seen = 0
    for request in deep_tool_calls(backend):
        with pytest.raises(LocalProtocolError) as caught:
            params_digest(request.params)
        assert caught.value.message == "params are not JSON values: nested deeper than 128 levels"
        seen += 1
    assert seen >= 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_opening_a_state_for_deep_params_is_wrong_params(backend: str) -> None:
    sealer = StateSealer({"k1": KEY}, "k1")
    token = sealer.seal(
        {"step": 1}, method="tools/call", params={"name": "t"}, principal=None, now=0.0
    )
    for request in deep_tool_calls(backend):
        with pytest.raises(InvalidRequestState) as caught:
            sealer.open(token, method="tools/call", params=request.params, principal=None, now=1.0)
        assert caught.value.reason == "wrong_params"


@pytest.mark.parametrize("backend", BACKENDS)
def test_sealing_a_state_for_deep_params_or_a_deep_state_is_a_local_protocol_error(
    backend: str,
) -> None:
    sealer = StateSealer({"k1": KEY}, "k1")
    for request in deep_tool_calls(backend):
        with pytest.raises(LocalProtocolError, match="nested deeper than 128 levels"):
            sealer.seal({}, method="tools/call", params=request.params, principal=None, now=0.0)
    with pytest.raises(LocalProtocolError, match="the state is not a JSON value: nested deeper"):
        sealer.seal(nested_list(5000), method="tools/call", params={}, principal=None, now=0.0)


def test_params_as_deep_as_a_message_may_be_are_digested() -> None:
    # The deepest message the default codec lets in: its params are 127 deep.
    line = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":%s}}'
        % nested_text(DEFAULT_MAX_DEPTH - 2)
    )
    request = Codec().decode(line)
    assert isinstance(request, Request) and request.params is not None
    digest = params_digest(request.params)
    assert digest == params_digest({"name": "t", "arguments": nested_list(DEFAULT_MAX_DEPTH - 2)})
    assert digest != params_digest({"name": "t", "arguments": nested_list(DEFAULT_MAX_DEPTH - 3)})
    with pytest.raises(LocalProtocolError):
        params_digest({"arguments": nested_list(DEFAULT_MAX_DEPTH)})  # 129 with the params
    looped: dict[str, Any] = {}
    looped["again"] = looped
    with pytest.raises(LocalProtocolError):
        params_digest({"arguments": looped})


def _stack_depth() -> int:
    frame = sys._getframe()
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


def test_a_caller_short_of_stack_gets_a_local_protocol_error_not_a_recursion_error() -> None:
    # The digest of params 120 deep, called with less stack left than the encoder needs
    # (on Python 3.11 it shares the interpreter's recursion limit): whatever the room,
    # the answer is the digest or LocalProtocolError.
    params = {"name": "t", "arguments": nested_list(120)}
    expected = params_digest(params)
    outcomes: list[str] = []
    limit = sys.getrecursionlimit()
    for room in range(30, 200, 10):
        here = _stack_depth()
        sys.setrecursionlimit(here + room)
        try:
            outcomes.append("ok" if params_digest(params) == expected else "wrong")
        except LocalProtocolError:
            outcomes.append("refused")
        finally:
            sys.setrecursionlimit(limit)
    assert "wrong" not in outcomes
    assert outcomes[-1] == "ok"  # with room enough it is the digest
    if sys.version_info < (3, 12):
        assert "refused" in outcomes  # the encoder ran out of room here: not a RecursionError
