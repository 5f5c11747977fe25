"""The Streamable HTTP header rules (mrtr_core.http._headers), sans-IO.

One rule for three places that used to keep their own copy: the HTTP client
(headers it sends), ``McpApp`` (annotations it accepts at registration) and the
HTTP server (headers it checks).  The ``test_divergence_*`` tests reproduce
where those copies disagreed and pin the rule that was kept.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

import mrtr_core as m
from mrtr_core.http._headers import (
    MAX_SAFE_INTEGER,
    MAX_SCHEMA_DEPTH,
    HeaderMismatch,
    InvalidHeaderAnnotation,
    MalformedHeader,
    MissingHeader,
    RepeatedHeader,
    called_tool,
    check_request_headers,
    decode_header_value,
    encode_header_value,
    header_fields,
    header_matches,
    header_text,
    request_headers,
    schema_header_params,
)

META = {m.wire.META_PROTOCOL_VERSION: "2026-07-28", m.wire.META_CLIENT_CAPABILITIES: {}}
STRING = {"type": "string"}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def annotated(name: Any, kind: Any = "string") -> dict[str, Any]:
    return {"type": kind, "x-mcp-header": name}


def call(name: str, arguments: Any = None, rid: Any = 1, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": META, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": "tools/call", "params": params}
    if rid is not None:
        message["id"] = rid
    return message


def received(*pairs: tuple[str, str]) -> dict[str, list[str]]:
    return header_fields(pairs)


def refused(message: dict[str, Any], *pairs: tuple[str, str], **kw: Any) -> HeaderMismatch:
    with pytest.raises(HeaderMismatch) as caught:
        check_request_headers(received(*pairs), message, **kw)
    error = caught.value
    assert error.code == m.ErrorCode.HEADER_MISMATCH == -32020
    assert error.message.startswith("Header mismatch: ")
    assert isinstance(error, m.RemoteProtocolError)
    return error


# --- Values ------------------------------------------------------------------------------


def test_values_are_encoded_plain_or_as_base64() -> None:
    assert encode_header_value("us-west1") == "us-west1"
    assert encode_header_value("us west 1") == "us west 1"
    assert encode_header_value("") == ""
    for unsafe in ("Hello, 世界", " padded ", "line1\nline2", "\tindented", "a\r\nb", "x ", "a\tb"):
        assert encode_header_value(unsafe) == b64(unsafe)
    # The spec's table of examples.
    assert encode_header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert encode_header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert encode_header_value("line1\nline2") == "=?base64?bGluZTEKbGluZTI=?="
    # A literal that looks like the sentinel is encoded too; a near miss is not.
    assert encode_header_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
    assert encode_header_value("=?base64??=") == b64("=?base64??=")
    assert encode_header_value("=?base64?=") == "=?base64?="
    assert encode_header_value("=?base64?abc") == "=?base64?abc"


def test_values_decode() -> None:
    assert decode_header_value("plain value") == "plain value"
    assert decode_header_value("tab\tinside") == "tab\tinside"  # HTAB is a field-value char
    assert decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=") == "Hello, 世界"
    assert decode_header_value("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=") == "=?base64?literal?="
    assert decode_header_value("=?base64??=") == ""
    assert decode_header_value("=?base64?SGVsbG8?=") is None  # padding
    assert decode_header_value("=?base64?SGVs!!!bG8=?=") is None  # alphabet
    assert decode_header_value("=?base64?/w==?=") is None  # not UTF-8
    assert decode_header_value("caf\xe9") is None  # raw non-ASCII must be encoded
    assert decode_header_value("a\x7fb") is None  # DEL
    assert decode_header_value("=?base64?SGVsbG8=") == "=?base64?SGVsbG8="  # no suffix: literal
    assert decode_header_value("=?base64?=") == "=?base64?="  # too short to be the sentinel


def test_header_names_and_values_a_request_may_carry() -> None:
    # One rule for annotations, received values and the headers a user adds (mrtr --header).
    assert m.http._headers.is_header_name("Authorization") and m.http._headers.is_header_name(
        "X-A_b.1~"
    )
    for bad in ("", "X A", "X:A", "Ü", "a\r\nb", None, 3):
        assert not m.http._headers.is_header_name(bad)
    assert m.http._headers.is_header_value("Bearer abc.def") and m.http._headers.is_header_value(
        "a\tb"
    )
    assert m.http._headers.is_header_value("")
    for bad in ("a\rb", "a\nb", "a\x00b", "a\x7fb", "café"):
        assert not m.http._headers.is_header_value(bad)


@pytest.mark.parametrize(
    "text", ["", "us-west1", " padded ", "Hello, 世界", "=?base64?x?=", "a\r\nb", "\x00"]
)
def test_encoding_round_trips(text: str) -> None:
    assert decode_header_value(encode_header_value(text)) == text


def test_argument_values_as_header_text() -> None:
    assert header_text("x") == "x"
    assert header_text(True) == "true" and header_text(False) == "false"
    assert header_text(42) == "42" and header_text(-7) == "-7"
    assert header_text(42.0) == "42"
    assert header_text(MAX_SAFE_INTEGER) == str(2**53 - 1)
    assert header_text(-MAX_SAFE_INTEGER) == str(-(2**53) + 1)
    for none in (None, 2**53, -(2**53), 3.14159, 2.0**60, float("nan"), [1], {"a": 1}):
        assert header_text(none) is None


def test_header_values_match_their_argument() -> None:
    assert header_matches("true", True) and header_matches("false", False)
    assert not header_matches("True", True) and not header_matches("1", True)
    assert header_matches("3.0", 3) and header_matches(" 3 ", 3) and header_matches("42", 42.0)
    assert not header_matches("4", 3) and not header_matches("three", 3)
    assert not header_matches("NaN", float("nan")) and not header_matches("Infinity", 1)
    assert header_matches("a b", "a b") and not header_matches("a", "A")
    assert not header_matches("[1]", [1]) and not header_matches("", None)


# --- Tool definitions --------------------------------------------------------------------


def test_annotations_map_headers_to_argument_paths() -> None:
    tool = schema(
        region=annotated("Region"),
        count=annotated("Count", "integer"),
        flag=annotated("Flag", "boolean"),
        opts={"type": "object", "properties": {"tenant": annotated("Tenant")}},
        plain=STRING,
        either={"anyOf": [STRING, {"type": "integer"}]},
    )
    tool["required"] = ["region"]
    assert list(schema_header_params(tool).items()) == [
        ("Region", ("region",)),
        ("Count", ("count",)),
        ("Flag", ("flag",)),
        ("Tenant", ("opts", "tenant")),
    ]
    deep = schema(a={"properties": {"b": {"properties": {"c": annotated("C")}}}})
    assert schema_header_params(deep) == {"C": ("a", "b", "c")}
    assert schema_header_params({"type": "object"}) == {}
    assert schema_header_params(None) == {} and schema_header_params("object") == {}


@pytest.mark.parametrize(
    ("prop", "reason"),
    [
        (annotated(""), "HTTP token"),
        (annotated("My Region"), "HTTP token"),
        (annotated("Region:1"), "HTTP token"),
        (annotated("Region:Primary"), "HTTP token"),
        (annotated("Region\t1"), "HTTP token"),
        (annotated("Région"), "HTTP token"),
        (annotated("Tab\t"), "HTTP token"),
        (annotated("CR\r\nInjected: 1"), "HTTP token"),
        (annotated("(paren)"), "HTTP token"),
        (annotated(5), "HTTP token"),
        (annotated(None), "HTTP token"),
        (annotated("Score", "number"), "string, integer or boolean"),
        (annotated("Data", "object"), "string, integer or boolean"),
        (annotated("Items", "array"), "string, integer or boolean"),
        (annotated("Nil", "null"), "string, integer or boolean"),
        (annotated("Either", ["string", "null"]), "string, integer or boolean"),
        ({"x-mcp-header": "Untyped"}, "string, integer or boolean"),
    ],
)
def test_invalid_annotations_are_refused(prop: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidHeaderAnnotation, match=reason) as caught:
        schema_header_params(schema(p=prop), tool="t")
    error = caught.value
    assert isinstance(error, ValueError) and isinstance(error, m.MrtrError)
    assert error.message.startswith("tool 't': ")
    assert error.header == prop["x-mcp-header"] and error.pointer == "#/properties/p"


def test_every_token_character_is_allowed() -> None:
    name = "!#$%&'*+-.^_`|~09AZaz"
    assert schema_header_params(schema(p=annotated(name))) == {name: ("p",)}


def test_annotation_names_are_unique_case_insensitively() -> None:
    twice = schema(a=annotated("MyField"), b=annotated("myfield"))
    with pytest.raises(InvalidHeaderAnnotation, match="used twice") as caught:
        schema_header_params(twice)
    assert "'MyField'" in caught.value.message and caught.value.pointer == "#/properties/b"
    nested_twice = schema(a=annotated("A"), o={"properties": {"a": annotated("a")}})
    with pytest.raises(InvalidHeaderAnnotation, match="used twice"):
        schema_header_params(nested_twice)


@pytest.mark.parametrize(
    ("tool", "pointer"),
    [
        ({**STRING, "x-mcp-header": "Root"}, "#"),
        (schema(a={"type": "array", "items": annotated("A")}), "#/properties/a/items"),
        (schema(a={"prefixItems": [annotated("A")]}), "#/properties/a/prefixItems/0"),
        ({"type": "object", "anyOf": [schema(a=annotated("A"))]}, "#/anyOf/0/properties/a"),
        (schema(a={"oneOf": [annotated("A")]}), "#/properties/a/oneOf/0"),
        (schema(a={"allOf": [annotated("A")]}), "#/properties/a/allOf/0"),
        (schema(a={"not": annotated("A")}), "#/properties/a/not"),
        ({"if": schema(a=annotated("A"))}, "#/if/properties/a"),
        ({"then": schema(a=annotated("A"))}, "#/then/properties/a"),
        ({"else": schema(a=annotated("A"))}, "#/else/properties/a"),
        ({"$defs": {"x": annotated("A")}}, "#/$defs/x"),
        ({**schema(a={"$ref": "#/$defs/x"}), "$defs": {"x": annotated("A")}}, "#/$defs/x"),
        ({"definitions": {"x/y": annotated("A")}}, "#/definitions/x~1y"),
        ({"patternProperties": {"^r": annotated("A")}}, "#/patternProperties/^r"),
        ({"additionalProperties": annotated("A")}, "#/additionalProperties"),
        (
            {"dependentSchemas": {"a": schema(b=annotated("A"))}},
            "#/dependentSchemas/a/properties/b",
        ),
    ],
)
def test_annotations_must_be_statically_reachable(tool: dict[str, Any], pointer: str) -> None:
    with pytest.raises(InvalidHeaderAnnotation, match="only on properties") as caught:
        schema_header_params(tool)
    assert caught.value.pointer == pointer and pointer in caught.value.message


def test_a_schema_nested_too_deeply_is_refused() -> None:
    fits: dict[str, Any] = annotated("Deep")
    for _ in range(MAX_SCHEMA_DEPTH):
        fits = {"properties": {"p": fits}}
    assert schema_header_params(fits) == {"Deep": ("p",) * MAX_SCHEMA_DEPTH}
    with pytest.raises(InvalidHeaderAnnotation, match="nested too deeply"):
        schema_header_params({"properties": {"p": fits}})
    with pytest.raises(InvalidHeaderAnnotation, match="nested too deeply"):
        schema_header_params({"allOf": [fits]})


# --- Where the three copies disagreed -------------------------------------------------------
# client = mrtr_transports.client.http.tool_headers, app = mcp_app.header_params,
# server = http.server.param_headers_of (before this module).


def test_divergence_an_annotation_on_the_root_is_refused() -> None:
    # app and server ignored it (the root has no path), the client refused it.
    with pytest.raises(InvalidHeaderAnnotation, match="only on properties"):
        schema_header_params({"type": "object", "x-mcp-header": "Root", "properties": {}})


def test_divergence_the_server_validates_like_the_others() -> None:
    # The server took any non-empty string on any property reached through properties,
    # and silently skipped the rest: it expected e.g. a "Mcp-Param-My Region" header,
    # one header for two arguments, or a number header; the app and client refused them.
    for bad in (
        schema(a=annotated("My Region")),
        schema(a=annotated("A"), b=annotated("a")),
        schema(a=annotated("Score", "number")),
        schema(a={"items": annotated("A")}),
    ):
        with pytest.raises(InvalidHeaderAnnotation):
            schema_header_params(bad)


def test_divergence_empty_and_non_string_names_are_not_tokens() -> None:
    # server: ignored; client: "empty or non-string"; app: "not an HTTP token".
    for name in ("", 5, None, ["A"]):
        with pytest.raises(InvalidHeaderAnnotation, match="HTTP token"):
            schema_header_params(schema(a=annotated(name)))


def test_divergence_deep_schemas_are_refused_not_crashed() -> None:
    # The app had no depth bound: a deep schema was a RecursionError, not a ValueError.
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        deep = {"anyOf": [deep]}
    with pytest.raises(InvalidHeaderAnnotation, match="nested too deeply"):
        schema_header_params(schema(a=deep))


def test_divergence_names_that_are_not_keywords_are_not_annotations() -> None:
    # client and app walked a `$defs` (and the client an unreachable `properties`) mapping
    # as if it were a schema: a definition or property *named* x-mcp-header was taken for
    # an annotation and the tool refused.
    named = {
        "type": "object",
        "properties": {"x-mcp-header": STRING, "a": annotated("A")},
        "$defs": {"x-mcp-header": STRING},
        "items": {"properties": {"x-mcp-header": STRING}},
    }
    assert schema_header_params(named) == {"A": ("a",)}


def test_divergence_data_keywords_hold_no_annotations() -> None:
    # client and app walked const/enum/default/examples values as schemas and refused a tool
    # whose default value merely has a key "x-mcp-header".
    data = schema(
        a={"type": "object", "default": {"x-mcp-header": "A"}},
        b={"const": {"x-mcp-header": "B"}},
        c={"enum": [{"x-mcp-header": "C"}]},
        d={**annotated("D"), "examples": [{"x-mcp-header": "E"}]},
    )
    assert schema_header_params(data) == {"D": ("d",)}


def test_divergence_one_shape_of_header_params() -> None:
    # client: ((path, name), ...); app: {name: path}; server: [ParamHeader(name, path)].
    found = schema_header_params(schema(a=annotated("A")))
    assert found == {"A": ("a",)} and type(found) is dict


def test_divergence_arguments_without_a_header_form() -> None:
    # The client omitted the header of an integer beyond 2**53-1 or a non-integral float,
    # while the server demanded one: now both follow header_text, and the server refuses
    # the call with a missing header, which a conforming client cannot send.
    params = {"N": ("n",)}
    for value in (2**53, 2.5):
        message = call("t", {"n": value})
        sent = request_headers(message, header_params=params)
        assert not [h for h, _ in sent if h.startswith("Mcp-Param-")]
        error = refused(message, *sent, header_params=params)
        assert isinstance(error, MissingHeader) and error.header == "Mcp-Param-N"


def test_divergence_mcp_method_takes_no_sentinel() -> None:
    # The client encodes any header value that is not plain; the server compares
    # Mcp-Method as it is (the sentinel is for Mcp-Name and Mcp-Param-* only), so a
    # method that is not header-safe fails as a mismatch, never as a raw control character.
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/\ncall", "params": {"_meta": META}}
    sent = request_headers(message)
    assert ("Mcp-Method", b64("tools/\ncall")) in sent
    assert refused(message, *sent).header == "Mcp-Method"


def test_divergence_tabs_are_encoded_when_sent_and_taken_when_received() -> None:
    # client: a tab forces base64; server: a plain tab is a valid field-value character.
    assert encode_header_value("a\tb") == b64("a\tb")
    params = {"R": ("r",)}
    message = call("t", {"r": "a\tb"})
    plain = [*request_headers(message), ("Mcp-Param-R", "a\tb")]
    check_request_headers(received(*plain), message, header_params=params)


# --- Requests: the headers a client sends ---------------------------------------------------


def test_request_headers_mirror_the_body() -> None:
    params = {"Region": ("region",), "Count": ("count",), "Zone": ("opts", "zone"), "F": ("f",)}
    arguments = {"region": "Zürich", "count": 3, "opts": {"zone": "b"}, "f": None, "q": "x"}
    assert request_headers(call("echo", arguments), header_params=params) == [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
        ("Mcp-Param-Region", b64("Zürich")),
        ("Mcp-Param-Count", "3"),
        ("Mcp-Param-Zone", "b"),
    ]
    assert request_headers(call("日本")) == [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", b64("日本")),
    ]
    read = {"method": "resources/read", "params": {"uri": "file:///a b", "_meta": META}}
    assert request_headers(read)[2] == ("Mcp-Name", "file:///a b")
    listing = {"method": "tools/list", "params": {"name": "ignored", "_meta": META}}
    assert [h for h, _ in request_headers(listing)] == ["MCP-Protocol-Version", "Mcp-Method"]


def test_request_headers_without_what_they_mirror() -> None:
    bare = {"method": "tools/call", "params": {"name": "t", "arguments": {"a": "x"}}}
    assert request_headers(bare, header_params={"A": ("a",)}) == [
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "t"),
        ("Mcp-Param-A", "x"),
    ]
    assert request_headers(bare, protocol_version="2026-07-28")[0] == (
        "MCP-Protocol-Version",
        "2026-07-28",
    )
    assert request_headers({"method": "x", "params": "junk"}, protocol_version="") == [
        ("Mcp-Method", "x")
    ]
    assert request_headers({"result": {}}, protocol_version="v") == [("MCP-Protocol-Version", "v")]
    no_name = {"method": "prompts/get", "params": {"name": 3}}
    assert request_headers(no_name, header_params={"A": ("a",)}) == [("Mcp-Method", "prompts/get")]
    prompt = {"method": "prompts/get", "params": {"name": "p", "arguments": {"a": "x"}}}
    assert request_headers(prompt, header_params={"A": ("a",)})[-1] == ("Mcp-Name", "p")
    not_an_object = call("t", ["x"])
    assert len(request_headers(not_an_object, header_params={"A": ("a",)})) == 3


def test_called_tool() -> None:
    assert called_tool(call("echo")) == "echo"
    assert called_tool({"method": "tools/call", "params": {"name": 1}}) is None
    assert called_tool({"method": "tools/call"}) is None
    assert called_tool({"method": "prompts/get", "params": {"name": "p"}}) is None


def test_received_fields_are_keyed_by_lower_case_name() -> None:
    fields = header_fields([("Mcp-Name", "a"), ("MCP-NAME", "b"), ("Host", "h")])
    assert fields == {"mcp-name": ["a", "b"], "host": ["h"]}


# --- Requests: the server's check -----------------------------------------------------------


def test_what_a_client_sends_passes_the_check() -> None:
    params = {"Region": ("region",), "Count": ("count",), "Flag": ("flag",), "T": ("o", "t")}
    for arguments in (
        {"region": "Zürich", "count": 3, "flag": True, "o": {"t": " x "}},
        {"region": "=?base64?literal?=", "count": 42.0, "flag": False},
        {"count": -(2**53) + 1, "o": None},
        {},
    ):
        message = call("headers", arguments)
        sent = request_headers(message, header_params=params)
        check_request_headers(received(*sent), message, header_params=params)
    for message in (
        {"jsonrpc": "2.0", "id": "r", "method": "resources/read", "params": {"uri": "ü://x"}},
        {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": META}},
    ):
        check_request_headers(received(*request_headers(message)), message)


def test_standard_headers_are_required_on_requests() -> None:
    message = call("echo", {})
    good = request_headers(message)
    version, method, name = good
    assert refused(message, version, name).header == "Mcp-Method"
    missing_version = refused(message, method, name)
    assert isinstance(missing_version, MissingHeader)
    assert missing_version.header == "MCP-Protocol-Version"
    assert missing_version.request_id == 1
    assert "the Mcp-Name header is missing" in refused(message, version, method).message
    # A notification need not carry them (none is defined for HTTP, but the rule is the same).
    check_request_headers({}, call("echo", {}, rid=None))
    # The body names no version: nothing to compare (the request is invalid for -32602).
    no_meta = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
    listing = ("Mcp-Method", "tools/list")
    check_request_headers(received(("MCP-Protocol-Version", "2026-07-28"), listing), no_meta)
    with pytest.raises(RepeatedHeader):
        check_request_headers(
            received(("MCP-Protocol-Version", "a"), ("mcp-protocol-version", "b"), listing),
            no_meta,
        )
    # Without a name in the body, no Mcp-Name is required.
    nameless = {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"_meta": META}}
    check_request_headers(received(version, ("Mcp-Method", "prompts/get")), nameless)


def test_standard_headers_must_equal_the_body() -> None:
    message = call("echo", {})
    version, method, name = request_headers(message)
    wrong = refused(message, version, ("Mcp-Method", "tools/list"), name)
    assert wrong.message == (
        "Header mismatch: Mcp-Method header value 'tools/list' does not match body value "
        "'tools/call'"
    )
    assert type(wrong) is HeaderMismatch
    assert refused(message, version, ("Mcp-Method", "TOOLS/CALL"), name).header == "Mcp-Method"
    old = ("MCP-Protocol-Version", "2025-11-25")
    assert refused(message, old, method, name).header == "MCP-Protocol-Version"
    assert refused(message, version, method, ("Mcp-Name", "other")).header == "Mcp-Name"
    assert "'other'" in refused(message, version, method, ("Mcp-Name", "other")).message
    check_request_headers(received(version, method, ("Mcp-Name", b64("echo"))), message)
    garbled = refused(message, version, method, ("Mcp-Name", "=?base64?ZWNo!!!?="))
    assert isinstance(garbled, MalformedHeader) and "malformed" in garbled.message
    raw = refused(message, version, method, ("Mcp-Name", "\xe9cho"))
    assert isinstance(raw, MalformedHeader)
    # A name header for a body whose name is not a string can never match.
    odd = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5, "_meta": META}}
    assert refused(odd, version, method, ("Mcp-Name", "5")).header == "Mcp-Name"
    read = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "test://a"}}
    assert refused(read, ("Mcp-Method", "resources/read"), ("Mcp-Name", "test://b"))


def test_repeated_headers_are_refused() -> None:
    message = call("echo", {"r": "x"})
    sent = request_headers(message)
    for header, value in sent:
        error = refused(message, *sent, (header.upper(), value))
        assert isinstance(error, RepeatedHeader) and error.header == header
        assert f"more than one {header} header" in error.message
    params = {"R": ("r",)}
    twice = [*sent, ("Mcp-Param-R", "x"), ("mcp-param-r", "x")]
    assert isinstance(refused(message, *twice, header_params=params), RepeatedHeader)


def test_param_headers_must_match_their_argument() -> None:
    params = {"Region": ("region",), "Count": ("count",), "Flag": ("flag",), "T": ("o", "t")}
    arguments = {"region": "Zürich", "count": 3, "flag": True, "o": {"t": "t-1"}}
    message = call("headers", arguments)
    base = request_headers(message)
    good = [
        ("Mcp-Param-Region", b64("Zürich")),
        ("Mcp-Param-Count", "3.0"),  # compared as a number
        ("mcp-param-flag", "true"),
        ("MCP-PARAM-T", "t-1"),
    ]
    check_request_headers(received(*base, *good), message, header_params=params)
    for index, bad, kind in [
        (0, ("Mcp-Param-Region", "Zurich"), HeaderMismatch),
        (0, ("Mcp-Param-Region", "=?base64?WnVyaWNo?="), HeaderMismatch),
        (0, ("Mcp-Param-Region", "=?base64?SGVsbG8?="), MalformedHeader),  # bad padding
        (0, ("Mcp-Param-Region", "Z\xfcrich"), MalformedHeader),  # raw non-ASCII
        (1, ("Mcp-Param-Count", "4"), HeaderMismatch),
        (2, ("Mcp-Param-Flag", "True"), HeaderMismatch),
        (3, ("Mcp-Param-T", "t-2"), HeaderMismatch),
    ]:
        headers = [*base, *good[:index], bad, *good[index + 1 :]]
        error = refused(message, *headers, header_params=params)
        assert type(error) is kind and error.header == bad[0]
    mismatch = refused(message, *base, ("Mcp-Param-Region", "Zurich"), header_params=params)
    assert mismatch.message == (
        "Header mismatch: Mcp-Param-Region header value 'Zurich' does not match "
        "argument 'region' = 'Zürich'"
    )
    missing = refused(message, *base, *good[1:], header_params=params)
    assert isinstance(missing, MissingHeader)
    assert "the Mcp-Param-Region header is missing for argument 'region'" in missing.message
    nested = refused(message, *base, *good[:3], header_params=params)
    assert "argument 'o.t'" in nested.message


def test_absent_and_null_arguments_take_no_header() -> None:
    params = {"Region": ("region",), "Count": ("count",), "T": ("o", "t")}
    for arguments in ({"count": 3}, {"count": 3, "region": None, "o": "not an object"}):
        message = call("headers", arguments)
        base = [*request_headers(message), ("Mcp-Param-Count", "3")]
        check_request_headers(received(*base), message, header_params=params)
        claims = refused(message, *base, ("Mcp-Param-Region", "x"), header_params=params)
        assert "header given, but the arguments have no 'region'" in claims.message
    # No arguments at all: nothing expected.
    bare = call("headers")
    check_request_headers(received(*request_headers(bare)), bare, header_params=params)


def test_param_headers_apply_to_tools_call_only() -> None:
    prompt = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "prompts/get",
        "params": {"name": "p", "arguments": {"a": "x"}, "_meta": META},
    }
    check_request_headers(received(*request_headers(prompt)), prompt, header_params={"A": ("a",)})


def test_a_message_without_a_method_is_not_checked() -> None:
    check_request_headers({"mcp-method": ["x", "y"]}, {"jsonrpc": "2.0", "id": 1, "result": {}})


def test_the_error_carries_the_request_id_when_it_is_one() -> None:
    for rid, expected in ((1, 1), ("r", "r"), (True, None), (None, None), ([1], None)):
        message = {"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": {"_meta": META}}
        assert refused(message).request_id == expected
    error = refused(call("echo", {}))
    assert m.error_response(error.request_id, error) == m.ErrorResponse(
        id=1, error=m.ErrorObject(code=-32020, message=error.message)
    )
