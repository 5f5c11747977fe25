"""The conformance fixtures app (``tests/support/conformance_app.py``).

Each fixture is called through ``app.handle`` with the requests the official
conformance suite sends, and checked for what its scenarios check; the SEP-2322
fixtures also run whole multi round-trip flows through a client and a server
``Connection``.  The suite itself runs against this app over a real ``mrtr serve``
subprocess in ``test_conformance_server.py``.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from mrtr_transports.apps.mcp_app import SUBSCRIPTION_ID
from support import conformance_app

import mrtr_core as m

# The app-level call helpers live beside the McpApp tests (tests/transports/apps).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apps"))
from test_mcp_app import (
    ALL_CAPS,
    RecordingOutlet,
    accept,
    call,
    error_of,
    retry_params,
    serve_call,
    start_listening,
)

#: One app for the module's tests (built as ``mrtr serve`` builds it).
app = conformance_app.build_conformance_app()
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "test-model"}


ROOTS_ANSWER = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}


def conformance_answer(key: str, request: m.wire.InputRequest) -> Any:
    """What the suite answers each kind of input request with."""
    if isinstance(request, m.wire.ElicitFormRequest):
        props = request.requested_schema["properties"]
        # A value of each field's type (answers are checked against the schema asked).
        by_type = {"boolean": True, "integer": 1, "number": 1, "string": "blue"}
        return accept(
            {
                name: "Alice" if name == "name" else by_type[schema["type"]]
                for name, schema in props.items()
            }
        )
    if isinstance(request, m.wire.CreateMessageRequest):
        return assistant("The capital of France is Paris.")
    return ROOTS_ANSWER


def text_of(result: Mapping[str, Any]) -> str:
    return str(result["content"][0]["text"])


# --- the app as discovery shows it -----------------------------------------------------------


async def test_tools_list_puts_a_plain_fixture_first_and_lists_everything() -> None:
    tools = (await call(app, "tools/list"))["tools"]
    names = [t["name"] for t in tools]
    # The header-validation scenario calls the first tool with no arguments and no capabilities.
    first = await call(app, "tools/call", {"name": names[0], "arguments": {}}, capabilities={})
    assert "isError" not in first and first.get("resultType") != "input_required"
    for fixture in (
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_error_handling",
        "test_tool_with_progress",
        "test_logging_tool",
        "test_missing_capability",
        "test_streaming_elicitation",
        "test_trigger_tool_change",
        "test_trigger_prompt_change",
        "json_schema_2020_12_tool",
        "test_header_mirroring",
        "test_input_required_result_elicitation",
        "test_input_required_result_sampling",
        "test_input_required_result_list_roots",
        "test_input_required_result_request_state",
        "test_input_required_result_multiple_inputs",
        "test_input_required_result_multi_round",
        "test_input_required_result_tampered_state",
        "test_input_required_result_capabilities",
        # the tasks extension's (SEP-2663)
        "greet",
        "slow_compute",
        "failing_job",
        "protocol_error_job",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
        # the 2025-11-25 leg's
        "test_tool_with_logging",
        "test_sampling",
        "test_elicitation",
        "test_elicitation_sep1034_defaults",
        "test_elicitation_sep1330_enums",
        "test_reconnection",
    ):
        assert fixture in names, fixture
    # Fixtures only: the example app's tools are not here.
    assert not {"weather", "deploy", "plan_trip", "connect_provider"} & set(names)
    assert all(t.get("description") for t in tools)
    assert names == [t["name"] for t in (await call(app, "tools/list"))["tools"]]  # stable order
    listed = await call(app, "tools/list")
    assert (listed["ttlMs"], listed["cacheScope"]) == (60_000, "public")


def test_deprecated_features_say_so() -> None:
    deprecated = [
        tool
        for tool in app.tools.values()
        if tool.name
        in (
            "test_sampling",
            "test_logging_tool",
            "test_missing_capability",
            "test_input_required_result_sampling",
            "test_input_required_result_list_roots",
            "test_input_required_result_multiple_inputs",
        )
    ]
    assert len(deprecated) == 6
    for tool in deprecated:
        assert tool.description is not None and "Deprecated in 2026-07-28" in tool.description


def test_discovery_offers_everything_the_suite_probes() -> None:
    assert app.capabilities == {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "completions": {},
        "logging": {},
        # the tasks extension (SEP-2663): the suite's tasks-* scenarios look for it here
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    assert app.info["name"] == "mrtr-conformance" and app.instructions


# --- content fixtures ------------------------------------------------------------------------


async def test_content_fixtures() -> None:
    async def tool(name: str) -> dict[str, Any]:
        return await call(app, "tools/call", {"name": name, "arguments": {}})

    assert text_of(await tool("test_simple_text")) == "This is a simple text response for testing."
    (image,) = (await tool("test_image_content"))["content"]
    assert image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG\r\n\x1a\n")
    (audio,) = (await tool("test_audio_content"))["content"]
    assert audio["mimeType"] == "audio/wav"
    assert base64.b64decode(audio["data"])[:4] == b"RIFF"
    (embedded,) = (await tool("test_embedded_resource"))["content"]
    assert embedded["resource"] == {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    mixed = (await tool("test_multiple_content_types"))["content"]
    assert [c["type"] for c in mixed] == ["text", "image", "resource"]
    assert json.loads(mixed[2]["resource"]["text"]) == {"test": "data", "value": 123}
    error = await tool("test_error_handling")
    assert error["isError"] is True and "intentionally" in text_of(error)


async def test_progress_fixture_reports_three_increasing_steps() -> None:
    outlet = RecordingOutlet()
    result = await call(app, "tools/call", {"name": "test_tool_with_progress"}, outlet=outlet)
    assert text_of(result) == "Progress test completed."
    assert [item[1:3] for item in outlet.sent] == [(0, 100), (50, 100), (100, 100)]
    over_the_wire = await serve_call(
        app, "tools/call", {"name": "test_tool_with_progress", "arguments": {}}, progress=True
    )
    assert over_the_wire.progress == [(0, 100), (50, 100), (100, 100)]


async def test_logging_fixture_logs_only_when_the_request_opts_in() -> None:
    params = {"name": "test_logging_tool", "arguments": {}}
    quiet = await serve_call(app, "tools/call", params)
    assert quiet.result is not None and quiet.notifications == []
    loud = await serve_call(app, "tools/call", params, log_level="warning")
    assert [n.params["data"] for n in loud.notifications if n.params] == ["halfway"]


async def test_json_schema_fixture_keeps_every_2020_12_keyword() -> None:
    tools = {t["name"]: t for t in (await call(app, "tools/list"))["tools"]}
    schema = tools["json_schema_2020_12_tool"]["inputSchema"]
    assert schema == conformance_app.JSON_SCHEMA_2020_12
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$defs"]["address"]["$anchor"] == "addressDef"
    assert {"allOf", "if", "then", "else"} <= set(schema) and schema[
        "additionalProperties"
    ] is False
    valid = {"name": "Bo", "contactMethod": "phone", "phone": "555", "address": {"city": "X"}}
    done = await call(app, "tools/call", {"name": "json_schema_2020_12_tool", "arguments": valid})
    assert text_of(done) == "Contact details received for Bo."


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"name": "Bo"}, "anyOf"),  # neither phone nor email (allOf/anyOf)
        ({"name": "Bo", "contactMethod": "phone", "email": "b@x.org"}, '"phone"'),  # if/then
        ({"name": "Bo", "email": "b@x.org", "age": 3}, "'age'"),  # additionalProperties
        ({"name": "Bo", "email": "b@x.org", "address": {"city": 7}}, "address/city"),  # $ref
    ],
    ids=["anyOf", "if-then", "additional", "ref"],
)
async def test_json_schema_fixture_arguments_are_validated_as_2020_12(
    arguments: dict[str, Any], complaint: str
) -> None:
    """Every keyword is enforced on the arguments, and a mismatch is a tool execution
    error the model can read (isError), not a JSON-RPC error."""
    done = await call(
        app, "tools/call", {"name": "json_schema_2020_12_tool", "arguments": arguments}
    )
    assert done["isError"] is True
    assert text_of(done).startswith("Invalid ")
    assert complaint in text_of(done)


async def test_header_fixture_declares_its_mcp_param_headers() -> None:
    assert app.tool_header_params("test_header_mirroring") == {
        "Region": ("region",),
        "Verbose": ("verbose",),
    }
    done = await call(
        app, "tools/call", {"name": "test_header_mirroring", "arguments": {"region": "Hello"}}
    )
    assert text_of(done) == "region=Hello"


async def test_missing_capability_fixture() -> None:
    params = {"name": "test_missing_capability", "arguments": {}}
    error = await error_of(app, "tools/call", params, capabilities={})
    assert error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
    assert error.data == {"requiredCapabilities": {"sampling": {}}}
    served = await serve_call(app, "tools/call", params, lambda k, r: assistant("hi!"))
    assert served.result is not None and text_of(served.result) == "The client's model said: hi!"


async def test_streaming_elicitation_fixture_asks_with_a_result_never_a_request() -> None:
    params = {"name": "test_streaming_elicitation", "arguments": {}}
    served = await serve_call(
        app, "tools/call", params, lambda k, r: accept({"ok": True}), log_level="info"
    )
    assert served.rounds == [("confirm",)]
    assert (
        served.result is not None
        and text_of(served.result) == "Streaming elicitation answered: accept"
    )
    # Re-entrant: the line before the ask runs on both legs, and each leg streams it.
    assert [n.method for n in served.notifications] == ["notifications/message"] * 2


# --- resources, prompts, completion ------------------------------------------------------------


async def test_resource_fixtures() -> None:
    listed = (await call(app, "resources/list"))["resources"]
    assert listed[0]["uri"] == "test://static-text"  # the caching scenario reads the first one
    assert all(r["name"] for r in listed)
    text = await call(app, "resources/read", {"uri": "test://static-text"})
    assert text["contents"] == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    (binary,) = (await call(app, "resources/read", {"uri": "test://static-binary"}))["contents"]
    assert binary["mimeType"] == "image/png" and base64.b64decode(binary["blob"])[:4] == b"\x89PNG"
    (templated,) = (await call(app, "resources/read", {"uri": "test://template/123/data"}))[
        "contents"
    ]
    assert json.loads(templated["text"]) == {
        "id": "123",
        "templateTest": True,
        "data": "Data for ID: 123",
    }
    assert (await call(app, "resources/templates/list"))["resourceTemplates"][0][
        "uriTemplate"
    ] == "test://template/{id}/data"
    missing_uri = "test://nonexistent-resource-for-conformance-testing"
    error = await error_of(app, "resources/read", {"uri": missing_uri})
    assert (error.code, error.data) == (m.ErrorCode.INVALID_PARAMS, {"uri": missing_uri})


async def test_prompt_fixtures() -> None:
    simple = await call(app, "prompts/get", {"name": "test_simple_prompt"})
    assert simple["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "This is a simple prompt for testing."},
        }
    ]
    args = {"arg1": "testValue1", "arg2": "testValue2"}
    with_args = await call(
        app, "prompts/get", {"name": "test_prompt_with_arguments", "arguments": args}
    )
    assert "testValue1" in json.dumps(with_args) and "testValue2" in json.dumps(with_args)
    embedded = await call(
        app,
        "prompts/get",
        {"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://x"}},
    )
    assert embedded["messages"][0]["content"]["resource"]["uri"] == "test://x"
    image = await call(app, "prompts/get", {"name": "test_prompt_with_image"})
    assert image["messages"][0]["content"]["type"] == "image"
    assert all(p["description"] for p in (await call(app, "prompts/list"))["prompts"])


async def test_input_required_prompt_fixture() -> None:
    params = {"name": "test_input_required_result_prompt"}
    first = await call(app, "prompts/get", params)
    request = first["inputRequests"]["user_context"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["required"] == ["context"]
    answers = {"user_context": accept({"context": "test context"})}
    done = await call(app, "prompts/get", retry_params(params, first, answers))
    assert "test context" in done["messages"][0]["content"]["text"]


async def test_completion_fixture_completes_by_prefix() -> None:
    params = {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "par"},
    }
    result = await call(app, "completion/complete", params)
    assert result == {
        "completion": {"values": ["paris", "park", "party"], "total": 3, "hasMore": False}
    }
    template = {
        "ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
        "argument": {"name": "id", "value": "4"},
    }
    assert (await call(app, "completion/complete", template))["completion"]["values"] == ["456"]


# --- SEP-2322 fixtures, as the conformance scenarios drive them --------------------------------


async def test_elicitation_fixture_asks_user_name_and_greets() -> None:
    params = {"name": "test_input_required_result_elicitation", "arguments": {}}
    first = await call(app, "tools/call", params)
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["user_name"] == {
        "method": "elicitation/create",
        "params": {"message": "What is your name?", "requestedSchema": NAME_SCHEMA},
    }
    done = await call(
        app, "tools/call", retry_params(params, first, {"user_name": accept({"name": "Alice"})})
    )
    assert text_of(done) == "Hello, Alice!"
    # missing-input-response: wrong keys only, no state: asked again, not an error
    wrong = await call(
        app, "tools/call", {**params, "inputResponses": {"wrong_key": accept({"data": "x"})}}
    )
    assert list(wrong["inputRequests"]) == ["user_name"]
    # ignore-extra-params: the right answer plus unknown keys, without requestState
    extra = {
        "user_name": accept({"name": "Alice"}),
        "unknown_extra_key": accept({"foo": "bar"}),
        "another_unexpected": accept({"baz": 123}),
    }
    assert (
        text_of(await call(app, "tools/call", {**params, "inputResponses": extra}))
        == "Hello, Alice!"
    )
    # validate-input: a number where an ElicitResult belongs, and null inputResponses
    for bad in ({"user_name": 12345}, None):
        error = await error_of(app, "tools/call", {**params, "inputResponses": bad})
        assert error.code == m.ErrorCode.INVALID_PARAMS


@pytest.mark.parametrize(
    ("tool", "key", "method", "expected"),
    [
        (
            "test_input_required_result_sampling",
            "capital_question",
            "sampling/createMessage",
            "Paris",
        ),
        (
            "test_input_required_result_list_roots",
            "client_roots",
            "roots/list",
            "file:///test/root",
        ),
    ],
)
async def test_single_input_fixtures(tool: str, key: str, method: str, expected: str) -> None:
    params = {"name": tool, "arguments": {}}
    first = await call(app, "tools/call", params)
    assert list(first["inputRequests"]) == [key]
    assert first["inputRequests"][key]["method"] == method
    answer = (
        assistant("The capital of France is Paris.") if key == "capital_question" else ROOTS_ANSWER
    )
    done = await call(app, "tools/call", retry_params(params, first, {key: answer}))
    assert expected in text_of(done)


async def test_request_state_fixture_validates_its_state() -> None:
    params = {"name": "test_input_required_result_request_state", "arguments": {}}
    first = await call(app, "tools/call", params)
    assert isinstance(first["requestState"], str) and first["inputRequests"]
    done = await call(
        app, "tools/call", retry_params(params, first, {"confirm": accept({"ok": True})})
    )
    assert "state-ok" in text_of(done)
    # The answer without the state does not count as validated: it asks again.
    stateless = await call(
        app, "tools/call", {**params, "inputResponses": {"confirm": accept({"ok": True})}}
    )
    assert stateless["resultType"] == "input_required"


async def test_multiple_inputs_fixture_asks_three_kinds_at_once() -> None:
    params = {"name": "test_input_required_result_multiple_inputs", "arguments": {}}
    first = await call(app, "tools/call", params)
    methods = {r["method"] for r in first["inputRequests"].values()}
    assert methods == {"elicitation/create", "sampling/createMessage", "roots/list"}
    assert first["requestState"]
    answers = {
        key: conformance_answer(key, m.wire.structure_input_request(r))
        for key, r in first["inputRequests"].items()
    }
    done = await call(app, "tools/call", retry_params(params, first, answers))
    assert text_of(done) == "The capital of France is Paris. Alice (1 roots)"
    # Only some answered: the rest is asked again (in a new flow: a state is used once).
    first = await call(app, "tools/call", params)
    partial = {"user_name": answers["user_name"]}
    again = await call(app, "tools/call", retry_params(params, first, partial))
    assert set(again["inputRequests"]) == {"greeting", "client_roots"}


async def test_multi_round_fixture_changes_its_state_each_round() -> None:
    params = {"name": "test_input_required_result_multi_round", "arguments": {}}
    first = await call(app, "tools/call", params)
    assert list(first["inputRequests"]) == ["step1"]
    second = await call(
        app, "tools/call", retry_params(params, first, {"step1": accept({"name": "Alice"})})
    )
    assert list(second["inputRequests"]) == ["step2"]
    assert second["requestState"] != first["requestState"]
    third = await call(
        app, "tools/call", retry_params(params, second, {"step2": accept({"color": "blue"})})
    )
    assert text_of(third) == "Alice likes blue."


async def test_tampered_state_fixture_refuses_a_modified_state() -> None:
    params = {"name": "test_input_required_result_tampered_state", "arguments": {}}
    first = await call(app, "tools/call", params)
    answers = {"confirm": accept({"ok": True})}
    tampered = {
        **retry_params(params, first, answers),
        "requestState": first["requestState"] + "-TAMPERED",
    }
    error = await error_of(app, "tools/call", tampered)
    assert (
        error.code == m.ErrorCode.INVALID_PARAMS
        and error.message == "Invalid or expired requestState"
    )
    assert (
        text_of(await call(app, "tools/call", retry_params(params, first, answers)))
        == "state verified"
    )


@pytest.mark.parametrize(
    ("capabilities", "keys"),
    [
        ({"sampling": {}}, {"sample"}),
        ({"elicitation": {}}, {"ask"}),
        (ALL_CAPS, {"sample", "ask"}),
    ],
)
async def test_capabilities_fixture_asks_only_what_was_declared(
    capabilities: dict[str, Any], keys: set[str]
) -> None:
    params = {"name": "test_input_required_result_capabilities", "arguments": {}}
    first = await call(app, "tools/call", params, capabilities=capabilities)
    assert set(first["inputRequests"]) == keys
    served = await serve_call(
        app, "tools/call", params, conformance_answer, capabilities=capabilities
    )
    assert served.result is not None and text_of(served.result).startswith("answered: ")


async def test_capabilities_fixture_without_any_capability_is_32021() -> None:
    params = {"name": "test_input_required_result_capabilities", "arguments": {}}
    error = await error_of(app, "tools/call", params, capabilities={})
    assert error.data == {"requiredCapabilities": {"sampling": {}}}


async def test_mrtr_fixtures_end_to_end_over_connections() -> None:
    for name, legs in (
        ("test_input_required_result_elicitation", 2),
        ("test_input_required_result_sampling", 2),
        ("test_input_required_result_list_roots", 2),
        ("test_input_required_result_request_state", 2),
        ("test_input_required_result_multiple_inputs", 2),
        ("test_input_required_result_multi_round", 3),
        ("test_input_required_result_tampered_state", 2),
    ):
        served = await serve_call(
            app, "tools/call", {"name": name, "arguments": {}}, conformance_answer
        )
        assert served.error is None and served.result is not None, name
        assert (served.result["resultType"], served.legs) == ("complete", legs), name


# --- list-change triggers and listen streams ---------------------------------------------------


async def test_triggers_change_the_lists_and_tell_listen_streams() -> None:
    wanted = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourceSubscriptions": ["test://watched-resource"],
    }
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            listening = await start_listening(nursery, app, wanted, rid=5)
            assert listening.outlet.sent[0][2]["notifications"] == wanted
            before = [t["name"] for t in (await call(app, "tools/list"))["tools"]]
            await call(app, "tools/call", {"name": "test_trigger_tool_change"})
            after = [t["name"] for t in (await call(app, "tools/list"))["tools"]]
            assert set(after) ^ set(before) == {"test_dynamic_tool"}
            await call(app, "tools/call", {"name": "test_trigger_prompt_change"})
            revision = conformance_app.watched["revision"]
            await call(app, "tools/call", {"name": "test_trigger_resource_update"})
            await listening.outlet.wait_for(4)
            await trio.testing.wait_all_tasks_blocked()
            tag = {SUBSCRIPTION_ID: 5}
            assert [item[1:] for item in listening.outlet.sent[1:]] == [
                ("notifications/tools/list_changed", {"_meta": tag}),
                ("notifications/prompts/list_changed", {"_meta": tag}),
                (
                    "notifications/resources/updated",
                    {"_meta": tag, "uri": "test://watched-resource"},
                ),
            ]
            read = await call(app, "resources/read", {"uri": "test://watched-resource"})
            assert read["contents"][0]["text"].endswith(f"revision {revision + 1}")
            assert read["ttlMs"] == 0
            # Trigger again: the lists are back as they were.
            await call(app, "tools/call", {"name": "test_trigger_tool_change"})
            await call(app, "tools/call", {"name": "test_trigger_prompt_change"})
            assert [t["name"] for t in (await call(app, "tools/list"))["tools"]] == before
            app.close_subscriptions()
