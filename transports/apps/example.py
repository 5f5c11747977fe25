"""The example server ``mrtr serve`` runs by default: ``mrtr_transports.apps.example:app``.

The model: one :class:`~mrtr_transports.apps.mcp_app.McpApp` with two kinds of
things in it.

* **Demo tools** that show the multi round-trip styles of ``docs/server.md``
  on a real server: ``weather`` (asks a city and units, then samples a tone from
  the client's LLM when the client can do sampling), ``deploy`` (a confirmation
  that must really have been asked, ``require_proof=True``, then a side effect
  guarded by ``ctx.once`` so it happens at most once however the legs are
  replayed) and ``plan_trip`` (two rounds of questions, for
  ``make demo``).
* **Conformance fixtures**: everything the official conformance suite's
  2026-07-28 server leg calls (``test_*`` tools, ``test://`` resources and
  template, ``test_*`` prompts, completion, logging, progress, list-change
  triggers for ``subscriptions/listen``, an ``x-mcp-header`` tool, a JSON
  Schema 2020-12 tool).  Their names and answers are the suite's.  The
  2025-11-25 leg's own fixtures (``test_sampling``, ``test_elicitation``,
  ``test_reconnection``, ...) live in ``example_2025`` and register on this
  app when it is imported.

Sampling and roots are deprecated in protocol 2026-07-28 (SEP-2577; they keep
working for at least twelve months), and so is logging: the tools that use
them say so in their descriptions.  Every handler here is a plain re-entrant
function or an ``async def`` that awaits progress or log messages; state across
rounds travels sealed in ``requestState``, so any process with the app's keys
could serve any leg.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import trio

import mrtr_core as m

from ..testing.fixture_data import (
    JSON_SCHEMA_2020_12,
    RED_PIXEL,
    SILENCE,
    embedded_text,
    image,
    text,
)
from .context import Context
from .mcp_app import McpApp

DEPRECATED = "Deprecated in 2026-07-28 (SEP-2577), still served"

app = McpApp(
    "mrtr-example",
    "0.1.0",
    title="mrtr example server",
    instructions=(
        "Demo tools (weather, deploy, plan_trip) ask for input over multi round-trip "
        "requests; the test_* tools, resources and prompts are conformance fixtures."
    ),
    # Lists are the same for every caller: cacheable by anyone for a minute
    # (a listChanged notification invalidates them sooner).
    cache_ttl_ms=60_000,
    cache_scope="public",
)


# ==========================================================================================
# Conformance fixtures.  tools/list order matters to the suite: its header checks call the
# first tool with no arguments and no capabilities, so the plain fixtures come first.
# ==========================================================================================


@app.tool()
def test_simple_text(ctx: Context) -> str:
    """Returns one text block."""
    return "This is a simple text response for testing."


@app.tool()
def test_image_content(ctx: Context) -> list[dict[str, Any]]:
    """Returns an image (a 1x1 red PNG)."""
    return [image()]


@app.tool()
def test_audio_content(ctx: Context) -> list[dict[str, Any]]:
    """Returns audio (10 ms of WAV silence)."""
    return [{"type": "audio", "data": SILENCE, "mimeType": "audio/wav"}]


@app.tool()
def test_embedded_resource(ctx: Context) -> list[dict[str, Any]]:
    """Returns an embedded text resource."""
    return [
        embedded_text(
            "test://embedded-resource", "text/plain", "This is an embedded resource content."
        )
    ]


@app.tool()
def test_multiple_content_types(ctx: Context) -> list[dict[str, Any]]:
    """Returns text, an image and an embedded resource."""
    return [
        text("Multiple content types test:"),
        image(),
        embedded_text(
            "test://mixed-content-resource", "application/json", '{"test":"data","value":123}'
        ),
    ]


@app.tool()
def test_error_handling(ctx: Context) -> str:
    """Always fails: the failure comes back as a tool result with isError."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@app.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100, about 50 ms apart."""
    for step in (0, 50, 100):
        if step:
            await trio.sleep(0.05)
        await ctx.progress(step, 100, f"{step}% done")
    return "Progress test completed."


@app.tool(description=f"Sends three log messages ({DEPRECATED}: opt in with _meta logLevel).")
async def test_logging_tool(ctx: Context) -> str:
    for level, message in (("info", "starting"), ("warning", "halfway"), ("info", "done")):
        await ctx.log(level, message, logger="test_logging_tool")
    return "Logging test completed."


SAY_HELLO = m.server.sample("Say hello", max_tokens=50)


@app.tool(description=f"Needs the client's sampling capability ({DEPRECATED}); -32021 without.")
def test_missing_capability(ctx: Context) -> Any:
    reply = ctx.answer("hello", SAY_HELLO)
    if reply is None:
        return ctx.ask({"hello": SAY_HELLO})  # -32021 naming sampling when undeclared
    return f"The client's model said: {_sampled_text(reply)}"


CONFIRM_STREAMING = m.server.elicit_form(
    "Continue the streaming test?", {"ok": {"type": "boolean"}}, required=["ok"]
)


@app.tool()
async def test_streaming_elicitation(ctx: Context) -> Any:
    """Streams a log line, then asks with an input_required result (never a request)."""
    await ctx.log("info", "about to ask for confirmation", logger="test_streaming_elicitation")
    answer = ctx.answer("confirm", CONFIRM_STREAMING)
    if answer is None:
        return ctx.ask({"confirm": CONFIRM_STREAMING})
    return f"Streaming elicitation answered: {answer.action}"  # type: ignore[union-attr]


def _dynamic_tool(ctx: Context) -> str:
    """Appears and disappears with test_trigger_tool_change."""
    return "dynamic"


def _dynamic_prompt(ctx: Context) -> str:
    """Appears and disappears with test_trigger_prompt_change."""
    return "A dynamic prompt."


def _toggle(
    name: str,
    registered: Mapping[str, Any],
    add: Callable[..., Any],
    remove: Callable[[str], None],
    fn: Callable[[Context], Any],
) -> str:
    """Register ``fn`` as ``name``, or remove it when it is there (the registry announces it)."""
    if name in registered:
        remove(name)
        return f"{name} removed"
    add(fn, name=name)
    return f"{name} added"


@app.tool()
def test_trigger_tool_change(ctx: Context) -> str:
    """Adds or removes test_dynamic_tool; listen streams get tools/list_changed."""
    return _toggle("test_dynamic_tool", app.tools, app.add_tool, app.remove_tool, _dynamic_tool)


@app.tool()
def test_trigger_prompt_change(ctx: Context) -> str:
    """Adds or removes test_dynamic_prompt; listen streams get prompts/list_changed."""
    return _toggle(
        "test_dynamic_prompt", app.prompts, app.add_prompt, app.remove_prompt, _dynamic_prompt
    )


watched = {"revision": 0}


@app.tool()
def test_trigger_resource_update(ctx: Context) -> str:
    """Changes test://watched-resource; listen streams subscribed to it get resources/updated."""
    watched["revision"] += 1
    app.notify_resource_updated("test://watched-resource")
    return f"test://watched-resource is at revision {watched['revision']}"


@app.tool(
    "json_schema_2020_12_tool",
    description="Tool with JSON Schema 2020-12 features",
    input_schema=JSON_SCHEMA_2020_12,
)
def json_schema_tool(ctx: Context) -> str:
    name = ctx.arguments.get("name", "someone")
    return f"Contact details received for {name}."


@app.tool(
    input_schema={
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "description": "Mirrored into the Mcp-Param-Region header",
                "x-mcp-header": "Region",
            },
            "verbose": {
                "type": "boolean",
                "description": "Mirrored into the Mcp-Param-Verbose header",
                "x-mcp-header": "Verbose",
            },
        },
    }
)
def test_header_mirroring(ctx: Context) -> str:
    """Arguments mirrored into Mcp-Param-* headers (HTTP checks them against the body)."""
    return f"region={ctx.arguments.get('region', '<none>')}"


# --- SEP-2322 input_required fixtures ------------------------------------------------------

USER_NAME = m.server.elicit_form(
    "What is your name?", {"name": {"type": "string"}}, required=["name"]
)


@app.tool()
def test_input_required_result_elicitation(ctx: Context) -> Any:
    """Asks the user's name (key user_name), then greets them."""
    name = ctx.answer("user_name", USER_NAME)
    if name is None:  # also when the retry answered other keys only: ask again
        return ctx.ask({"user_name": USER_NAME})
    return f"Hello, {_form(name).get('name', 'stranger')}!"


CAPITAL = m.server.sample("What is the capital of France?", max_tokens=100)


@app.tool(description=f"Asks the client's LLM a question (sampling: {DEPRECATED}).")
def test_input_required_result_sampling(ctx: Context) -> Any:
    reply = ctx.answer("capital_question", CAPITAL)
    if reply is None:
        return ctx.ask({"capital_question": CAPITAL})
    return f"The model answered: {_sampled_text(reply)}"


ROOTS = m.server.list_roots()


@app.tool(description=f"Asks for the client's roots (roots: {DEPRECATED}).")
def test_input_required_result_list_roots(ctx: Context) -> Any:
    roots = ctx.answer("client_roots", ROOTS)
    if roots is None:
        return ctx.ask({"client_roots": ROOTS})
    uris = [root.uri for root in roots.roots]  # type: ignore[union-attr]
    return f"Client roots: {', '.join(uris) or '(none)'}"


PLEASE_CONFIRM = m.server.elicit_form(
    "Please confirm", {"ok": {"type": "boolean"}}, required=["ok"]
)


@app.tool()
def test_input_required_result_request_state(ctx: Context) -> Any:
    """Asks for a confirmation with a sealed requestState, then checks the state came back."""
    answer = ctx.answer("confirm", PLEASE_CONFIRM)
    if ctx.state != {"asked": "confirm"} or answer is None:
        return ctx.ask({"confirm": PLEASE_CONFIRM}, state={"asked": "confirm"})
    # Reaching here means the sealed state was opened and verified: integrity, TTL, binding.
    return f"state-ok: confirmed={_form(answer).get('ok')}"


GREETING = m.server.sample("Generate a greeting", max_tokens=50)


@app.tool(description=f"Asks a form, the client's LLM and its roots at once ({DEPRECATED}).")
def test_input_required_result_multiple_inputs(ctx: Context) -> Any:
    asks: dict[str, m.wire.InputRequest] = {
        "user_name": USER_NAME,
        "greeting": GREETING,
        "client_roots": ROOTS,
    }
    answers = {key: ctx.answer(key, asked) for key, asked in asks.items()}
    missing = {key: asks[key] for key, answer in answers.items() if answer is None}
    if missing:
        return ctx.ask(missing, state={"round": "all"})
    name = _form(answers["user_name"]).get("name")
    roots = len(answers["client_roots"].roots)  # type: ignore[union-attr]
    return f"{_sampled_text(answers['greeting'])} {name} ({roots} roots)"


STEP1 = m.server.elicit_form(
    "Step 1: What is your name?", {"name": {"type": "string"}}, required=["name"]
)
STEP2 = m.server.elicit_form(
    "Step 2: What is your favorite color?", {"color": {"type": "string"}}, required=["color"]
)


@app.tool()
def test_input_required_result_multi_round(ctx: Context) -> Any:
    """Two rounds (a name, then a color); the sealed state carries the name between them."""
    state = ctx.state or {}
    if "name" not in state:
        name = ctx.answer("step1", STEP1)
        if name is None:
            return ctx.ask({"step1": STEP1}, state={"round": 1})
        return ctx.ask({"step2": STEP2}, state={"round": 2, "name": _form(name).get("name")})
    color = ctx.answer("step2", STEP2)
    if color is None:
        return ctx.ask({"step2": STEP2}, state=state)
    return f"{state['name']} likes {_form(color).get('color')}."


@app.tool()
def test_input_required_result_tampered_state(ctx: Context) -> Any:
    """Seals its requestState (HMAC): a modified one is refused with -32602."""
    answer = ctx.answer("confirm", PLEASE_CONFIRM)
    if ctx.state is None or answer is None:
        return ctx.ask({"confirm": PLEASE_CONFIRM}, state={"asked": "confirm"})
    return "state verified"


CAPABILITY_HELLO = m.server.sample("Say hello", max_tokens=50)


@app.tool(description=f"Asks only what the request declared (sampling: {DEPRECATED}).")
def test_input_required_result_capabilities(ctx: Context) -> Any:
    possible: dict[str, m.wire.InputRequest] = {"sample": CAPABILITY_HELLO, "ask": USER_NAME}
    allowed = {key: asked for key, asked in possible.items() if ctx.can_ask(asked)}
    if not allowed:
        raise m.server.CapabilityRequired({"sampling": {}})
    answered = [key for key, asked in allowed.items() if ctx.answer(key, asked) is not None]
    if len(answered) < len(allowed):
        return ctx.ask({k: v for k, v in allowed.items() if k not in answered})
    return f"answered: {', '.join(answered)}"


# --- resources --------------------------------------------------------------------------------


@app.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text(ctx: Context) -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary(ctx: Context) -> bytes:
    """A static binary resource (a 1x1 red PNG)."""
    return base64.b64decode(RED_PIXEL)


@app.resource(
    "test://watched-resource",
    name="watched-resource",
    mime_type="text/plain",
    ttl_ms=0,  # changes whenever test_trigger_resource_update runs
)
def watched_resource(ctx: Context) -> str:
    """Changes with test_trigger_resource_update: subscribe to it on subscriptions/listen."""
    return f"Watched resource content, revision {watched['revision']}"


@app.resource_template(
    "test://template/{id}/data", name="template-data", mime_type="application/json"
)
def template_data(ctx: Context) -> str:
    """Data for an id: the template variable is substituted into the content."""
    ident = ctx.uri_params["id"]
    return f'{{"id":"{ident}","templateTest":true,"data":"Data for ID: {ident}"}}'


# --- prompts ----------------------------------------------------------------------------------


@app.prompt()
def test_simple_prompt(ctx: Context) -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@app.prompt(
    arguments=[
        {"name": "arg1", "description": "First test argument", "required": True},
        {"name": "arg2", "description": "Second test argument", "required": True},
    ]
)
def test_prompt_with_arguments(ctx: Context) -> str:
    """A prompt with two required arguments, substituted into its text."""
    args = ctx.arguments
    return f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"


@app.prompt(
    arguments=[{"name": "resourceUri", "description": "URI of the resource", "required": True}]
)
def test_prompt_with_embedded_resource(ctx: Context) -> list[Any]:
    """A prompt that embeds a resource."""
    resource = {
        "uri": ctx.arguments["resourceUri"],
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return [
        {"role": "user", "content": {"type": "resource", "resource": resource}},
        "Please process the embedded resource above.",
    ]


@app.prompt()
def test_prompt_with_image(ctx: Context) -> list[Any]:
    """A prompt with an image."""
    return [{"role": "user", "content": image()}, "Please analyze the image above."]


PROMPT_CONTEXT = m.server.elicit_form(
    "What context should the prompt use?", {"context": {"type": "string"}}, required=["context"]
)


@app.prompt()
def test_input_required_result_prompt(ctx: Context) -> Any:
    """A prompt that asks the user for context first (input_required on prompts/get)."""
    answer = ctx.answer("user_context", PROMPT_CONTEXT)
    if answer is None:
        return ctx.ask({"user_context": PROMPT_CONTEXT})
    return f"Use this context: {_form(answer).get('context')}"


# --- completion -------------------------------------------------------------------------------

SUGGESTIONS = {
    ("test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test", "testing"],
    ("test_prompt_with_arguments", "arg2"): ["world", "word", "work"],
    ("test://template/{id}/data", "id"): ["123", "456", "789"],
}


@app.completion()
def complete(ctx: Context) -> list[str]:
    """Suggestions for the prompt arguments and the template variable, by prefix."""
    ref, argument = ctx.params["ref"], ctx.params["argument"]
    target = ref.get("name") if ref["type"] == "ref/prompt" else ref.get("uri")
    prefix = argument["value"]
    return [v for v in SUGGESTIONS.get((target, argument["name"]), []) if v.startswith(prefix)]


# ==========================================================================================
# Demo tools.
# ==========================================================================================

CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = m.server.elicit_form(
    "Units?", {"units": {"type": "string", "enum": ["C", "F"]}}, required=["units"]
)
TONE = m.server.sample("Describe sunshine in three words", max_tokens=10)


@app.tool(
    description=(
        "The weather in a city: asks the city, then the units, then (if the client "
        f"can sample; sampling: {DEPRECATED}) a tone from the client's LLM."
    )
)
def weather(ctx: Context) -> Any:
    state = ctx.state or {}
    if "city" not in state:
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})
        return ctx.ask({"units": UNITS}, state={"city": _form(city).get("city", "?")})
    if "units" not in state:
        units = ctx.answer("units", UNITS)
        if units is None:
            return ctx.ask({"units": UNITS}, state=state)
        state = {**state, "units": _form(units).get("units", "C")}
        if ctx.can_ask(TONE):
            return ctx.ask({"tone": TONE}, state=state)
        return _forecast(state, "sunny")  # no sampling declared: do without the flourish
    tone = ctx.answer("tone", TONE)
    if tone is None:
        return ctx.ask({"tone": TONE}, state=state)
    return _forecast(state, _sampled_text(tone))


def _forecast(state: dict[str, Any], tone: str) -> str:
    degrees = 21 if state["units"] == "C" else 70
    return f"{state['city']}: {degrees} {state['units']}, {tone}"


CONFIRM_DEPLOY = m.server.elicit_form(
    "Deploy now?", {"confirm": {"type": "boolean"}}, required=["confirm"]
)
#: What ``deploy`` did, oldest first (bounded: the example keeps the last 100).
deployments: list[str] = []


@app.tool(
    input_schema={
        "type": "object",
        "properties": {"env": {"type": "string", "description": "Where to deploy"}},
    },
    annotations={"destructiveHint": True, "idempotentHint": False},
    # A confirmation no sealed state proves was asked reads as missing: a client that
    # invents ``inputResponses.confirm`` on the first call is simply asked.
    require_proof=True,
)
def deploy(ctx: Context) -> Any:
    """Deploys after the user confirms; the deployment runs at most once per call."""
    # The sealed state is bound to these arguments: a retry cannot switch the env.
    env = str(ctx.arguments.get("env", "staging"))
    answer = ctx.answer("confirm", CONFIRM_DEPLOY)
    if answer is None:
        return ctx.ask({"confirm": CONFIRM_DEPLOY})
    if answer.action != "accept" or not _form(answer).get("confirm"):  # type: ignore[union-attr]
        return f"Not deployed to {env}."
    if ctx.once("deploy"):  # the redeemed state was spent first: a replay cannot redo it
        deployments.append(env)
        del deployments[:-100]
    return f"Deployed to {env}."


TRAVELLER = m.server.elicit_form(
    "Who is travelling?", {"name": {"type": "string"}}, required=["name"]
)
NIGHTS = m.server.elicit_form(
    "How many nights?",
    {"nights": {"type": "integer", "minimum": 1, "maximum": 30}},
    required=["nights"],
)


@app.tool(
    input_schema={
        "type": "object",
        "properties": {"destination": {"type": "string"}},
        "required": ["destination"],
    }
)
def plan_trip(ctx: Context) -> Any:
    """Plans a trip in two rounds of questions: who travels, then for how long."""
    destination = str(ctx.arguments["destination"])
    state = ctx.state or {}
    if "name" not in state:
        traveller = ctx.answer("traveller", TRAVELLER)
        if traveller is None:
            return ctx.ask({"traveller": TRAVELLER})
        return ctx.ask({"nights": NIGHTS}, state={"name": _form(traveller).get("name")})
    nights = ctx.answer("nights", NIGHTS)
    if nights is None:
        return ctx.ask({"nights": NIGHTS}, state=state)
    count = _form(nights).get("nights")
    return f"Trip to {destination} for {state['name']}: {count} nights."


# --- reading answers ----------------------------------------------------------------------


def _form(answer: m.wire.InputResponse | None) -> dict[str, Any]:
    """An elicitation's accepted content (``{}`` when declined, cancelled or empty)."""
    if isinstance(answer, m.wire.ElicitResult) and answer.action == "accept" and answer.content:
        return dict(answer.content)
    return {}


def _sampled_text(answer: m.wire.InputResponse | None) -> str:
    if isinstance(answer, m.wire.CreateMessageResult):
        content = answer.content
        if isinstance(content, dict) and isinstance(content.get("text"), str):
            return str(content["text"])
    return "(no text)"


# Fixtures that live in their own modules register themselves on this app: the
# 2025-11-25 leg's (test_sampling, test_elicitation, ...) and the URL-elicitation demo tool.
from . import example_2025, example_auth  # noqa: E402, F401
