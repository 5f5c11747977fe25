"""The conformance suite's 2025-11-25 server fixtures, added to the conformance app.

The suite's 2025-era server leg (``--spec-version 2025-11-25``) calls tools the
2026-07-28 leg does not: the ones that ask the client with server-to-client
requests (``test_sampling``, ``test_elicitation``, the SEP-1034 and SEP-1330
elicitation schemas), ``test_tool_with_logging`` and ``test_reconnection``
(SEP-1699: the server closes the request's SSE stream mid-call, the client
comes back with ``Last-Event-ID``).  Here they are plain MRTR handlers: they
return ``input_required`` like every tool of this app, and a 2025 client gets
real ``elicitation/create`` / ``sampling/createMessage`` requests from the
transport's legacy shim.  A 2026-07-28 client may call them too.

They are :data:`fixtures` (``build_conformance_app`` adds them to its app after
the 2026-07-28 leg's); their names and answers are the suite's.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mrtr_transports.apps.context import Context

import mrtr_core as m

# Imported as ``support.conformance_2025`` (the tests) or served as a file (``mrtr serve
# --app tests/support/conformance_app.py:build_conformance_app``, its folder on sys.path).
if __package__:
    from .fixture_data import DEPRECATED, sampled_text
    from .fixture_set import FixtureSet
else:
    from fixture_data import DEPRECATED, sampled_text
    from fixture_set import FixtureSet

__all__ = ["SEP1034_DEFAULTS", "SEP1330_ENUMS", "fixtures"]

fixtures = FixtureSet()


@fixtures.tool(description="Sends three info log messages about 50 ms apart (2025-era fixture).")
async def test_tool_with_logging(ctx: Context) -> str:
    for step, message in enumerate(
        ("Tool execution started", "Tool processing data", "Tool execution completed")
    ):
        if step:
            await anyio.sleep(0.05)
        await ctx.log("info", message, logger="test_tool_with_logging")
    return "Logging tool completed."


@fixtures.tool(
    description=f"Asks the client's LLM the given prompt (sampling: {DEPRECATED}).",
    input_schema={
        "type": "object",
        "properties": {"prompt": {"type": "string"}},
        "required": ["prompt"],
    },
)
def test_sampling(ctx: Context) -> Any:
    asked = m.server.sample(str(ctx.arguments.get("prompt", "")), max_tokens=100)
    reply = ctx.answer("sampling", asked)
    if reply is None:
        return ctx.ask({"sampling": asked})
    return f"LLM response: {sampled_text(reply)}"


def _user_info(message: str) -> m.wire.ElicitFormRequest:
    return m.server.elicit_form(
        message,
        {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        required=["username", "email"],
    )


@fixtures.tool(
    description="Asks the user for a name and an email address.",
    input_schema={
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
)
def test_elicitation(ctx: Context) -> Any:
    asked = _user_info(str(ctx.arguments.get("message", "")))
    answer = ctx.answer("user_info", asked)
    if answer is None:
        return ctx.ask({"user_info": asked})
    return f"User response: {_shown(answer)}"


SEP1034_DEFAULTS = m.server.elicit_form(
    "Please review your details (every field has a default)",
    {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
)


@fixtures.tool(description="Asks a form whose fields all have defaults (SEP-1034).")
def test_elicitation_sep1034_defaults(ctx: Context) -> Any:
    answer = ctx.answer("defaults", SEP1034_DEFAULTS)
    if answer is None:
        return ctx.ask({"defaults": SEP1034_DEFAULTS})
    return f"Elicitation completed: {_shown(answer)}"


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


SEP1330_ENUMS = m.server.elicit_form(
    "Pick some options (every enum form of SEP-1330)",
    {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": _titled(
                ("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")
            ),
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": _titled(
                    ("value1", "First Choice"),
                    ("value2", "Second Choice"),
                    ("value3", "Third Choice"),
                )
            },
        },
    },
)


@fixtures.tool(description="Asks a form with every enum form (SEP-1330).")
def test_elicitation_sep1330_enums(ctx: Context) -> Any:
    answer = ctx.answer("enums", SEP1330_ENUMS)
    if answer is None:
        return ctx.ask({"enums": SEP1330_ENUMS})
    return f"Elicitation completed: {_shown(answer)}"


@fixtures.tool(
    description="Closes its SSE stream mid-call, then answers: the client resumes with "
    "Last-Event-ID (SEP-1699; 2025-era HTTP sessions)."
)
async def test_reconnection(ctx: Context) -> str:
    close = getattr(ctx.outlet, "close_sse_stream", None)
    if close is not None:  # only a 2025-era HTTP session's stream can be resumed
        await close()
        await anyio.sleep(0.1)  # the answer comes after the stream closed
    return "Reconnection test completed."


def _shown(answer: m.wire.InputResponse) -> str:
    if isinstance(answer, m.wire.ElicitResult):
        content = json.dumps(answer.content or {}, sort_keys=True)
        return f"action={answer.action}, content={content}"
    return "(not an elicitation answer)"
