"""Joining encoded objects and writing a request from encoded parts."""

from __future__ import annotations

import json

import pytest

from mrtr_core.wire._splice import join_objects, request_bytes


@pytest.mark.parametrize(
    ("head", "tail", "joined"),
    [
        (b'{"a":1}', b'{"b":[2]}', b'{"a":1,"b":[2]}'),
        (b'{"a":1,"c":{}}', b'{"b":"}"}', b'{"a":1,"c":{},"b":"}"}'),
        (b"{}", b'{"b":2}', b'{"b":2}'),
        (b'{"a":1}', b"{}", b'{"a":1}'),
        (b"{}", b"{}", b"{}"),
    ],
)
def test_join_objects(head: bytes, tail: bytes, joined: bytes) -> None:
    assert join_objects(head, tail) == joined
    assert json.loads(joined) == {**json.loads(head), **json.loads(tail)}


@pytest.mark.parametrize(
    ("head", "tail"),
    [
        (b"", b"{}"),
        (b"{}", b""),
        (b"{", b"{}"),
        (b"{}", b"}"),
        (b"[1]", b"{}"),
        (b"{}", b'"x"'),
        (b' {"a":1}', b'{"b":2}'),
        (b'{"a":1}', b'{"b":2} '),
    ],
)
def test_join_objects_refuses_what_is_not_a_compact_object(head: bytes, tail: bytes) -> None:
    assert join_objects(head, tail) is None


@pytest.mark.parametrize("end", [b"", b"\n"])
def test_request_bytes(end: bytes) -> None:
    line = request_bytes(42, b'"tools/call"', b'{"name":"x"}', end)
    assert line.endswith(end)
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 42,
        "method": "tools/call",
        "params": {"name": "x"},
    }
