"""The protocol rules the connection applies, tested as the pure functions they are."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_core import AppResultRefused, RemoteProtocolError, Request
from mrtr_core._connection._server_rules import (
    check_input_required,
    check_server_request,
    discover_result,
    finish_result,
    initialize_result,
)
from mrtr_core._meta import (
    choose_version,
    has_modern_meta,
    is_retry_leg,
    log_level_allows,
    negotiate_legacy,
    progress_token_of,
    read_modern_request,
)
from mrtr_core.server import RequestInfo

VERSION = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LEVEL = "io.modelcontextprotocol/logLevel"
SERVER_INFO = {"name": "s", "version": "1"}


def _meta(**extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {VERSION: "2026-07-28", CAPS: {}}
    meta.update(extra)
    return {"_meta": meta}


def _info(method: str = "tools/call", *, era: Any = "modern", **over: Any) -> RequestInfo:
    fields: dict[str, Any] = {
        "id": 1,
        "method": method,
        "era": era,
        "protocol_version": "2026-07-28",
        "capabilities": {},
        "client_info": None,
        "log_level": None,
        "progress_token": None,
        "retry": False,
    }
    fields.update(over)
    return RequestInfo(**fields)


# --- reading a 2026-07-28 request ------------------------------------------------


def test_a_complete_modern_request_is_read_into_request_info() -> None:
    params = _meta(**{INFO: {"name": "c"}, LEVEL: "info", "progressToken": "p"})
    params["requestState"] = "s"
    info = read_modern_request(7, "tools/call", params, ("2026-07-28",))
    assert info == _info(
        id=7, client_info={"name": "c"}, log_level="info", progress_token="p", retry=True
    )


@pytest.mark.parametrize(
    ("meta", "fragment"),
    [
        ({VERSION: 2026, CAPS: {}}, "must be a string"),
        ({VERSION: "2026-07-28"}, "clientCapabilities is required"),
        ({VERSION: "2026-07-28", CAPS: []}, "clientCapabilities is required"),
        ({VERSION: "2026-07-28", CAPS: {}, INFO: "me"}, "clientInfo must be an object"),
        ({VERSION: "2026-07-28", CAPS: {}, LEVEL: "loud"}, "logLevel must be one of"),
    ],
)
def test_a_malformed_modern_meta_is_invalid_params(meta: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RemoteProtocolError, match=fragment) as caught:
        read_modern_request("r", "tools/list", {"_meta": meta}, ("2026-07-28",))
    assert caught.value.code == -32602 and caught.value.request_id == "r"


def test_an_unsupported_version_is_32022_naming_both_sides() -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        read_modern_request(3, "tools/list", _meta(**{VERSION: "1999-01-01"}), ("2026-07-28",))
    assert caught.value.code == -32022
    assert caught.value.data == {"supported": ["2026-07-28"], "requested": "1999-01-01"}


def test_small_readers() -> None:
    assert has_modern_meta(_meta()) and not has_modern_meta(None)
    assert not has_modern_meta({"_meta": "x"}) and not has_modern_meta({"_meta": {}})
    assert progress_token_of({"_meta": {"progressToken": 5}}) == 5
    assert progress_token_of({"_meta": {"progressToken": True}}) is None
    assert progress_token_of({"_meta": None}) is None and progress_token_of(None) is None
    assert is_retry_leg({"inputResponses": {}}) and not is_retry_leg(None)
    assert log_level_allows("warning", "error") and not log_level_allows("warning", "info")
    assert not log_level_allows(None, "emergency")
    assert choose_version(["a", "b"], ("b", "a")) == "b"
    assert choose_version(["c"], ("b",)) is None and choose_version("b", ("b",)) is None
    assert negotiate_legacy("2025-06-18", ("2025-11-25", "2025-06-18")) == "2025-06-18"
    assert negotiate_legacy("2020-01-01", ("2025-11-25", "2025-06-18")) == "2025-11-25"


# --- finishing a result ------------------------------------------------------------------


def _finish(info: RequestInfo, result: dict[str, Any], **options: Any) -> dict[str, Any]:
    options.setdefault("server_info", SERVER_INFO)
    options.setdefault("cache_ttl_ms", 5000)
    options.setdefault("cache_scope", "public")
    return finish_result(info, result, **options)


def test_a_modern_result_gets_result_type_and_server_info_without_touching_the_input() -> None:
    given = {"content": [], "_meta": {"x": 1}}
    out = _finish(_info(), given)
    assert out == {
        "content": [],
        "resultType": "complete",
        "_meta": {"x": 1, "io.modelcontextprotocol/serverInfo": SERVER_INFO},
    }
    assert given == {"content": [], "_meta": {"x": 1}}


def test_server_info_given_by_the_app_is_kept_and_none_configured_adds_none() -> None:
    own = {"io.modelcontextprotocol/serverInfo": {"name": "mine"}}
    assert _finish(_info(), {"_meta": own})["_meta"] == own
    assert "_meta" not in _finish(_info(), {}, server_info=None)


def test_cacheable_results_get_ttl_and_scope_and_retry_legs_are_never_cacheable() -> None:
    out = _finish(_info("tools/list"), {"tools": []})
    assert (out["ttlMs"], out["cacheScope"]) == (5000, "public")
    kept = _finish(_info("tools/list"), {"tools": [], "ttlMs": 1, "cacheScope": "private"})
    assert (kept["ttlMs"], kept["cacheScope"]) == (1, "private")
    retry = _finish(
        _info("resources/read", retry=True), {"contents": [], "ttlMs": 9, "cacheScope": "public"}
    )
    assert (retry["ttlMs"], retry["cacheScope"]) == (0, "private")
    assert "ttlMs" not in _finish(_info("tools/call"), {"content": []})


def test_a_valid_input_required_gets_server_info_but_no_cache_fields() -> None:
    result = {"resultType": "input_required", "requestState": "s", "_meta": None}
    out = _finish(_info("resources/read"), result)
    assert out == {
        "resultType": "input_required",
        "requestState": "s",
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
    }
    explicit = _finish(_info("tools/list"), {"resultType": "complete", "tools": []})
    assert explicit["resultType"] == "complete" and explicit["ttlMs"] == 5000


def test_an_unknown_result_type_is_refused() -> None:
    with pytest.raises(AppResultRefused, match="unknown resultType") as caught:
        _finish(_info(), {"resultType": "later"})
    assert caught.value.code == -32603


def test_a_legacy_result_passes_unchanged() -> None:
    assert _finish(_info(era="legacy"), {"content": []}) == {"content": []}


ASK_SAMPLING = {
    "method": "sampling/createMessage",
    "params": {"messages": [], "maxTokens": 1},
}


@pytest.mark.parametrize(
    ("info", "result", "fragment", "code"),
    [
        (_info(era="legacy"), {"requestState": "s"}, "2025-era client", -32603),
        (_info("tools/list"), {"requestState": "s"}, "cannot answer input_required", -32603),
        (_info(), {}, "needs inputRequests or requestState", -32603),
        (_info(), {"inputRequests": []}, "malformed input_required", -32603),
        (_info(), {"inputRequests": {"k": ASK_SAMPLING}}, "did not declare", -32021),
    ],
)
def test_illegal_input_required_answers(
    info: RequestInfo, result: dict[str, Any], fragment: str, code: int
) -> None:
    result = {"resultType": "input_required", **result}
    with pytest.raises(AppResultRefused, match=fragment) as caught:
        check_input_required(info, result)
    assert caught.value.code == code


def test_missing_capabilities_are_merged_into_required_capabilities() -> None:
    tools = {
        "method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 1, "tools": []},
    }
    url = {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "u"}}
    result = {
        "resultType": "input_required",
        "inputRequests": {"a": ASK_SAMPLING, "b": tools, "c": url, "d": {"method": "roots/list"}},
    }
    with pytest.raises(AppResultRefused) as caught:
        check_input_required(_info(capabilities={"elicitation": {}}), result)
    assert caught.value.data == {
        "requiredCapabilities": {
            "sampling": {"tools": {}},
            "elicitation": {"url": {}},
            "roots": {},
        }
    }
    allowed = {"elicitation": {"url": {}}, "sampling": {"tools": {}}, "roots": {}}
    check_input_required(_info(capabilities=allowed), result)  # no error


# --- server-to-client requests (2025 era) -----------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "caps", "fragment"),
    [
        ("tools/call", None, {}, "cannot send 'tools/call'"),
        ("elicitation/create", {"mode": "url", "url": "u"}, {}, "needs an elicitationId"),
        ("elicitation/create", {"mode": "url", "elicitationId": "e"}, {"elicitation": {}}, "url"),
        ("elicitation/create", {"message": "m"}, {}, "elicitation.form"),
        ("elicitation/create", {"message": "m"}, {"elicitation": {"url": {}}}, "form"),
        ("sampling/createMessage", {}, {"roots": {}}, "sampling"),
        ("roots/list", None, {"sampling": {}}, "roots"),
    ],
)
def test_server_requests_the_client_cannot_take_are_refused(
    method: str, params: Any, caps: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(AppResultRefused, match=fragment):
        check_server_request(Request(id=1, method=method, params=params), caps)


@pytest.mark.parametrize(
    ("method", "params", "caps"),
    [
        ("ping", None, {}),
        ("elicitation/create", {"message": "m"}, {"elicitation": {}}),
        ("elicitation/create", {"message": "m"}, {"elicitation": {"form": {}}}),
        ("elicitation/create", {"mode": "url", "elicitationId": "e"}, {"elicitation": {"url": {}}}),
        ("sampling/createMessage", {}, {"sampling": {}}),
        ("roots/list", None, {"roots": {}}),
    ],
)
def test_server_requests_the_client_declared_pass(
    method: str, params: Any, caps: dict[str, Any]
) -> None:
    check_server_request(Request(id=1, method=method, params=params), caps)


def test_discover_and_initialize_results() -> None:
    assert discover_result(("2026-07-28",), {"tools": {}}, None) == {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}},
    }
    assert discover_result((), {}, "Be nice")["instructions"] == "Be nice"
    assert initialize_result("2025-11-25", {}, None, None) == {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "serverInfo": {},
    }
    assert initialize_result("2025-11-25", {}, SERVER_INFO, "hi")["instructions"] == "hi"
