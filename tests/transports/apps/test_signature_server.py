"""Schemas from signatures through the real server: ``mrtr serve --stdio`` in a subprocess
serving ``support.signature_app``, and our client talking to it over the pipes.

What a client sees: ``tools/list`` carries the generated ``inputSchema`` and
``outputSchema``, and ``prompts/list`` the prompt's arguments; a call with good
arguments gets the converted result (structured for an object return); bad arguments
get a tool error that names the argument (the model can correct it), never -32603;
a tool that forgot to return gets a tool error that says so; a prompt and a resource
template take their arguments and URI variables as parameters.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import trio
from mrtr_transports.client.client import Client
from mrtr_transports.client.stdio import open_stdio_client
from support.cli_run import TESTS_ON_PATH

pytestmark = pytest.mark.subprocess

SERVE = [
    sys.executable,
    "-m",
    "mrtr_transports.cli.main",
    "serve",
    "--stdio",
    "--app",
    "support.signature_app:app",
]


async def listed_tools(client: Client) -> dict[str, dict[str, Any]]:
    listed = await client.request("tools/list", {})
    return {tool["name"]: tool for tool in listed["tools"]}


async def test_tools_list_shows_the_schemas_the_signatures_give() -> None:
    with trio.fail_after(30):
        async with open_stdio_client(SERVE, env=TESTS_ON_PATH) as client:
            tools = await listed_tools(client)
            prompts = await client.request("prompts/list", {})
    forecast = tools["forecast"]
    assert forecast["description"] == "The forecast for a place."
    assert forecast["inputSchema"] == {
        "type": "object",
        "properties": {
            "place": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "country": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                },
                "required": ["city"],
                "additionalProperties": False,
                "description": "where to forecast",
            },
            "days": {"type": "integer", "description": "how many days", "default": 1},
            "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
        },
        "required": ["place"],
        "additionalProperties": False,
    }
    assert forecast["outputSchema"]["required"] == ["place", "days", "highs", "units"]
    assert tools["add"]["description"] == "Adds two numbers"
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert "outputSchema" not in tools["add"]  # a number or a string: text only
    assert tools["reset"]["inputSchema"] == {"type": "object"}  # the context alone
    assert prompts["prompts"][0]["arguments"] == [
        {"name": "topic", "required": True, "description": "what the haiku is about"},
        {"name": "tone", "required": False},
    ]


async def test_calls_with_good_and_bad_arguments() -> None:
    with trio.fail_after(30):
        async with open_stdio_client(SERVE, env=TESTS_ON_PATH) as client:
            place = {"city": "Lisbon"}
            good = await client.call_tool("forecast", {"place": place, "days": 2})
            added = await client.call_tool("add", {"a": 1, "b": 2})
            as_text = await client.call_tool("add", {"a": 1, "b": 2.5, "mode": "text"})
            bad_type = await client.call_tool("forecast", {"place": place, "days": "two"})
            bad_nested = await client.call_tool("forecast", {"place": {"town": "Lisbon"}})
            bad_enum = await client.call_tool("forecast", {"place": place, "units": "kelvin"})
            missing = await client.call_tool("add", {"a": 1})
            forgot = await client.call_tool("forget", {"note": "x"})
            reset = await client.call_tool("reset", {})
            prompt = await client.call(
                "prompts/get", {"name": "haiku", "arguments": {"topic": "tea"}}
            )
            read = await client.call("resources/read", {"uri": "notes://ada/7"})
    expected = {
        "place": {"city": "Lisbon", "country": None},
        "days": 2,
        "highs": [20.5, 21.5],
        "units": "metric",
    }
    assert good["structuredContent"] == expected
    assert json.loads(good["content"][0]["text"]) == expected
    assert "isError" not in good
    assert added["content"] == [{"type": "text", "text": "3.0"}]  # b: float, so 1 + 2.0
    assert as_text["content"][0]["text"] == "1 + 2.5 = 3.5"
    for result, says in [
        (bad_type, "Invalid argument 'days': "),
        (bad_nested, "Invalid argument 'place/"),
        (bad_enum, "Invalid argument 'units': "),
        (missing, "Invalid argument 'b': "),
    ]:
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith(says), result
    assert forgot["isError"] is True
    assert forgot["content"][0]["text"].startswith("tool 'forget' returned None: return its")
    assert reset["content"] == [] and "isError" not in reset
    assert prompt["messages"][0]["content"]["text"] == "Write a calm haiku about tea"
    assert read["contents"][0]["text"] == "note 7 of ada"
