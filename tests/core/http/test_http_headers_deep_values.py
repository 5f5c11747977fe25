"""The header rules show a peer's values bounded: a deep or huge value in the body, a
header or a tool's schema makes a short message, never a ``RecursionError``."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import mrtr_core as m
from mrtr_core.http._headers import (
    HeaderMismatch,
    InvalidHeaderAnnotation,
    MalformedHeader,
    check_request_headers,
    header_fields,
    schema_header_params,
)

META = {m.wire.META_PROTOCOL_VERSION: "2026-07-28", m.wire.META_CLIENT_CAPABILITIES: {}}
DEEP_SHOWN = "list [[[…]]]"


def nested_list(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def tool_call(name: Any, arguments: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, "_meta": META}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def headers(*extra: tuple[str, str]) -> dict[str, list[str]]:
    return header_fields(
        [("Mcp-Method", "tools/call"), ("MCP-Protocol-Version", "2026-07-28"), *extra]
    )


def refusal(message: dict[str, Any], received: dict[str, list[str]], **kw: Any) -> str:
    with pytest.raises(HeaderMismatch) as caught:
        check_request_headers(received, message, **kw)
    assert len(caught.value.message) < 300
    return caught.value.message


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_a_deep_argument_against_its_header_is_a_short_mismatch(depth: int) -> None:
    message = tool_call("t", {"r": nested_list(depth)})
    text = refusal(
        message, headers(("Mcp-Name", "t"), ("Mcp-Param-R", "x")), header_params={"R": ("r",)}
    )
    assert text == (
        "Header mismatch: Mcp-Param-R header value 'x' does not match argument 'r' = " + DEEP_SHOWN
    )


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_a_deep_tool_name_against_mcp_name_is_a_short_mismatch(depth: int) -> None:
    text = refusal(tool_call(nested_list(depth), {}), headers(("Mcp-Name", "t")))
    assert (
        text == f"Header mismatch: Mcp-Name header value 't' does not match body value {DEEP_SHOWN}"
    )


def test_huge_header_values_are_cut() -> None:
    huge = "h" * 1_000_000
    cut = "'" + "h" * 40 + "'…"
    text = refusal(tool_call("t", {}), headers(("Mcp-Name", huge)))
    assert text == f"Header mismatch: Mcp-Name header value {cut} does not match body value 't'"
    with pytest.raises(MalformedHeader) as caught:
        check_request_headers(headers(("Mcp-Name", "=?base64?" + huge + "?=")), tool_call("t", {}))
    assert len(caught.value.message) < 200
    with pytest.raises(MalformedHeader) as caught:
        check_request_headers(
            headers(("Mcp-Name", "t"), ("Mcp-Param-R", "=?base64?" + huge + "?=")),
            tool_call("t", {"r": "v"}),
            header_params={"R": ("r",)},
        )
    assert len(caught.value.message) < 200
    text = refusal(
        tool_call("t", {"r": huge}),
        headers(("Mcp-Name", "t"), ("Mcp-Param-R", b64("other"))),
        header_params={"R": ("r",)},
    )
    assert text.endswith(f"= {cut}")


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deep_annotations_in_a_peers_schema_are_refused_with_short_messages(depth: int) -> None:
    deep = nested_list(depth)
    for prop, expected in (
        (
            {"type": "string", "x-mcp-header": deep},
            f"x-mcp-header {DEEP_SHOWN} is not an HTTP token",
        ),
        ({"type": deep, "x-mcp-header": "H"}, f"x-mcp-header 'H' is on a {DEEP_SHOWN} property"),
    ):
        with pytest.raises(InvalidHeaderAnnotation) as caught:
            schema_header_params({"type": "object", "properties": {"a": prop}}, tool="t" * 10_000)
        text = caught.value.message
        assert text.startswith("tool '" + "t" * 40 + "'…: " + expected), text
        assert len(text) < 400
    with pytest.raises(InvalidHeaderAnnotation) as caught:
        schema_header_params({"type": "object", "x-mcp-header": deep})  # on the root
    assert caught.value.message.startswith(f"x-mcp-header {DEEP_SHOWN} is not statically reachable")
