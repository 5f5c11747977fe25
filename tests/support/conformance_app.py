"""The conformance fixtures, served as ``mrtr serve --app
tests/support/conformance_app.py:build_conformance_app``.

The model: one :class:`~mrtr_transports.apps.mcp_app.McpApp`, made by
:func:`build_conformance_app`, holding everything
the official MCP conformance suite's server legs call, and nothing else, so the
suite (``tests/transports/testing/test_conformance_server.py``) and the interop
tests serve it while users get the example app (``mrtr_transports.apps.example``)
with real examples only.  Names, texts and answers are the suite's:

* the 2026-07-28 leg's ``test_*`` tools (content, errors, progress, logging,
  list-change triggers for ``subscriptions/listen``, an ``x-mcp-header`` tool, a
  JSON Schema 2020-12 tool and the SEP-2322 ``input_required`` fixtures), and the
  SEP-2663 task fixtures (``greet``, ``slow_compute``, ``failing_job``,
  ``protocol_error_job``, ``confirm_delete``, ``multi_input``, ``test_tool_with_task``),
  ``test://`` resources and template, ``test_*`` prompts and completion;
* the 2025-11-25 leg's own fixtures (``test_sampling``, ``test_elicitation``,
  ``test_reconnection``, ...) in ``conformance_2025.py``, added after these.

They live with the tests, not in the installed package: only the suite and the
tests serve them.  Each module's handlers are a :class:`FixtureSet` (written once
with the usual decorators, added to each app built); a handler that changes the
app reaches it as ``ctx.app``.

Sampling, roots and logging are deprecated in protocol 2026-07-28 (SEP-2577;
they keep working for at least twelve months): the fixtures that use them say so.
Every handler is a plain re-entrant function or an ``async def`` that awaits
progress or log messages; state across rounds travels sealed in ``requestState``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.results import tool_error
from mrtr_transports.apps.task_runs import TaskContext
from mrtr_transports.apps.task_store import MemoryTaskStore

import mrtr_core as m

# Imported as ``support.conformance_app`` (the tests) or served as a file (``mrtr serve
# --app tests/support/conformance_app.py:build_conformance_app``, its folder on sys.path).
if __package__:
    from . import conformance_2025
    from .fixture_data import (
        DEPRECATED,
        JSON_SCHEMA_2020_12,
        RED_PIXEL,
        SILENCE,
        embedded_text,
        image,
        sampled_text,
        text,
    )
    from .fixture_set import FixtureSet
else:
    import conformance_2025
    from fixture_data import (
        DEPRECATED,
        JSON_SCHEMA_2020_12,
        RED_PIXEL,
        SILENCE,
        embedded_text,
        image,
        sampled_text,
        text,
    )
    from fixture_set import FixtureSet

__all__ = ["DEPRECATED", "JSON_SCHEMA_2020_12", "build_conformance_app", "fixtures", "watched"]

fixtures = FixtureSet()
#: Seconds the fixtures' tasks tell clients to wait between polls.
TASK_POLL_INTERVAL = 0.1


def build_conformance_app() -> McpApp:
    """A new app with every conformance fixture, the 2026-07-28 leg's first."""
    app = McpApp(
        "mrtr-conformance",
        "0.1.0",
        title="mrtr conformance fixtures",
        instructions=(
            "The fixtures the official MCP conformance suite calls (test_* tools, test:// "
            "resources, test_* prompts): for testing clients and servers, not for users."
        ),
        # Lists are the same for every caller: cacheable by anyone for a minute
        # (a listChanged notification invalidates them sooner).
        cache_ttl_ms=60_000,
        cache_scope="public",
        # Clients poll a task every pollIntervalMs: a tenth of a second, not the default
        # second, so that a test (or the suite's tasks scenarios) waits on the task, not
        # on the interval.
        tasks=MemoryTaskStore(poll_interval=TASK_POLL_INTERVAL),
    )
    fixtures.add_to(app)
    conformance_2025.fixtures.add_to(app)
    return app


# ==========================================================================================
# Conformance fixtures.  tools/list order matters to the suite: its header checks call the
# first tool with no arguments and no capabilities, so the plain fixtures come first.
# ==========================================================================================


@fixtures.tool()
def test_simple_text(ctx: Context) -> str:
    """Returns one text block."""
    return "This is a simple text response for testing."


@fixtures.tool()
def test_image_content(ctx: Context) -> list[dict[str, Any]]:
    """Returns an image (a 1x1 red PNG)."""
    return [image()]


@fixtures.tool()
def test_audio_content(ctx: Context) -> list[dict[str, Any]]:
    """Returns audio (10 ms of WAV silence)."""
    return [{"type": "audio", "data": SILENCE, "mimeType": "audio/wav"}]


@fixtures.tool()
def test_embedded_resource(ctx: Context) -> list[dict[str, Any]]:
    """Returns an embedded text resource."""
    return [
        embedded_text(
            "test://embedded-resource", "text/plain", "This is an embedded resource content."
        )
    ]


@fixtures.tool()
def test_multiple_content_types(ctx: Context) -> list[dict[str, Any]]:
    """Returns text, an image and an embedded resource."""
    return [
        text("Multiple content types test:"),
        image(),
        embedded_text(
            "test://mixed-content-resource", "application/json", '{"test":"data","value":123}'
        ),
    ]


@fixtures.tool()
def test_error_handling(ctx: Context) -> str:
    """Always fails: the failure comes back as a tool result with isError."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@fixtures.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100, about 50 ms apart."""
    for step in (0, 50, 100):
        if step:
            await anyio.sleep(0.05)
        await ctx.progress(step, 100, f"{step}% done")
    return "Progress test completed."


@fixtures.tool(description=f"Sends three log messages ({DEPRECATED}: opt in with _meta logLevel).")
async def test_logging_tool(ctx: Context) -> str:
    for level, message in (("info", "starting"), ("warning", "halfway"), ("info", "done")):
        await ctx.log(level, message, logger="test_logging_tool")
    return "Logging test completed."


SAY_HELLO = m.server.sample("Say hello", max_tokens=50)


@fixtures.tool(
    description=f"Needs the client's sampling capability ({DEPRECATED}); -32021 without."
)
def test_missing_capability(ctx: Context) -> Any:
    reply = ctx.answer("hello", SAY_HELLO)
    if reply is None:
        return ctx.ask({"hello": SAY_HELLO})  # -32021 naming sampling when undeclared
    return f"The client's model said: {sampled_text(reply)}"


CONFIRM_STREAMING = m.server.elicit_form(
    "Continue the streaming test?", {"ok": {"type": "boolean"}}, required=["ok"]
)


@fixtures.tool()
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


@fixtures.tool()
def test_trigger_tool_change(ctx: Context) -> str:
    """Adds or removes test_dynamic_tool; listen streams get tools/list_changed."""
    app = ctx.app
    return _toggle("test_dynamic_tool", app.tools, app.add_tool, app.remove_tool, _dynamic_tool)


@fixtures.tool()
def test_trigger_prompt_change(ctx: Context) -> str:
    """Adds or removes test_dynamic_prompt; listen streams get prompts/list_changed."""
    app = ctx.app
    return _toggle(
        "test_dynamic_prompt", app.prompts, app.add_prompt, app.remove_prompt, _dynamic_prompt
    )


watched = {"revision": 0}


@fixtures.tool()
def test_trigger_resource_update(ctx: Context) -> str:
    """Changes test://watched-resource; listen streams subscribed to it get resources/updated."""
    watched["revision"] += 1
    ctx.app.notify_resource_updated("test://watched-resource")
    return f"test://watched-resource is at revision {watched['revision']}"


@fixtures.tool(
    "json_schema_2020_12_tool",
    description="Tool with JSON Schema 2020-12 features",
    input_schema=JSON_SCHEMA_2020_12,
)
def json_schema_tool(ctx: Context) -> str:
    name = ctx.arguments.get("name", "someone")
    return f"Contact details received for {name}."


@fixtures.tool(
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


@fixtures.tool()
def test_input_required_result_elicitation(ctx: Context) -> Any:
    """Asks the user's name (key user_name), then greets them."""
    name = ctx.answer("user_name", USER_NAME)
    if name is None:  # also when the retry answered other keys only: ask again
        return ctx.ask({"user_name": USER_NAME})
    return f"Hello, {_form(name).get('name', 'stranger')}!"


CAPITAL = m.server.sample("What is the capital of France?", max_tokens=100)


@fixtures.tool(description=f"Asks the client's LLM a question (sampling: {DEPRECATED}).")
def test_input_required_result_sampling(ctx: Context) -> Any:
    reply = ctx.answer("capital_question", CAPITAL)
    if reply is None:
        return ctx.ask({"capital_question": CAPITAL})
    return f"The model answered: {sampled_text(reply)}"


ROOTS = m.server.list_roots()


@fixtures.tool(description=f"Asks for the client's roots (roots: {DEPRECATED}).")
def test_input_required_result_list_roots(ctx: Context) -> Any:
    roots = ctx.answer("client_roots", ROOTS)
    if roots is None:
        return ctx.ask({"client_roots": ROOTS})
    uris = [root.uri for root in roots.roots]  # type: ignore[union-attr]
    return f"Client roots: {', '.join(uris) or '(none)'}"


PLEASE_CONFIRM = m.server.elicit_form(
    "Please confirm", {"ok": {"type": "boolean"}}, required=["ok"]
)


@fixtures.tool()
def test_input_required_result_request_state(ctx: Context) -> Any:
    """Asks for a confirmation with a sealed requestState, then checks the state came back."""
    answer = ctx.answer("confirm", PLEASE_CONFIRM)
    if ctx.state != {"asked": "confirm"} or answer is None:
        return ctx.ask({"confirm": PLEASE_CONFIRM}, state={"asked": "confirm"})
    # Reaching here means the sealed state was opened and verified: integrity, TTL, binding.
    return f"state-ok: confirmed={_form(answer).get('ok')}"


GREETING = m.server.sample("Generate a greeting", max_tokens=50)


@fixtures.tool(description=f"Asks a form, the client's LLM and its roots at once ({DEPRECATED}).")
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
    return f"{sampled_text(answers['greeting'])} {name} ({roots} roots)"


STEP1 = m.server.elicit_form(
    "Step 1: What is your name?", {"name": {"type": "string"}}, required=["name"]
)
STEP2 = m.server.elicit_form(
    "Step 2: What is your favorite color?", {"color": {"type": "string"}}, required=["color"]
)


@fixtures.tool()
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


@fixtures.tool()
def test_input_required_result_tampered_state(ctx: Context) -> Any:
    """Seals its requestState (HMAC): a modified one is refused with -32602."""
    answer = ctx.answer("confirm", PLEASE_CONFIRM)
    if ctx.state is None or answer is None:
        return ctx.ask({"confirm": PLEASE_CONFIRM}, state={"asked": "confirm"})
    return "state verified"


CAPABILITY_HELLO = m.server.sample("Say hello", max_tokens=50)


@fixtures.tool(description=f"Asks only what the request declared (sampling: {DEPRECATED}).")
def test_input_required_result_capabilities(ctx: Context) -> Any:
    possible: dict[str, m.wire.InputRequest] = {"sample": CAPABILITY_HELLO, "ask": USER_NAME}
    allowed = {key: asked for key, asked in possible.items() if ctx.can_ask(asked)}
    if not allowed:
        raise m.server.CapabilityRequired({"sampling": {}})
    answered = [key for key, asked in allowed.items() if ctx.answer(key, asked) is not None]
    if len(answered) < len(allowed):
        return ctx.ask({k: v for k, v in allowed.items() if k not in answered})
    return f"answered: {', '.join(answered)}"


# --- SEP-2663 task fixtures (the suite's tasks-* scenarios) ----------------------------------
# Tools that may (task="optional") or must (task="required") hand their work to a task with
# ``return ctx.run_task(work, ...)``; the work gets a TaskContext.  Last among the tools
# of this leg: the header checks call the first tool listed.


@fixtures.tool()
def greet(ctx: Context, name: str) -> str:
    """Sync only: greets by name."""
    return f"Hello, {name}!"


@fixtures.tool(task="optional")
def slow_compute(ctx: Context, seconds: float = 1, label: str = "") -> Any:
    """Sleeps `seconds` then answers (a task when the client declared the extension)."""
    return ctx.run_task(_slow_compute, seconds, label)


async def _slow_compute(task: TaskContext, seconds: float, label: str) -> str:
    await task.status(f"computing {label or 'it'} for {seconds} s")
    await anyio.sleep(seconds)  # a tasks/cancel cancels it here: the task ends cancelled
    return f"Computed {label or 'it'} in {seconds} s."


@fixtures.tool(task="required")
def failing_job(ctx: Context) -> Any:
    """Always a task (-32021 to a client without the extension); ends in a tool error."""
    return ctx.run_task(_failing_job)


async def _failing_job(task: TaskContext) -> Any:
    await anyio.sleep(1)
    return tool_error("The job failed: this tool always reports an error after a second.")


@fixtures.tool(task="optional")
def protocol_error_job(ctx: Context) -> Any:
    """Its task fails with a JSON-RPC error (a protocol error, not a tool error)."""
    return ctx.run_task(_protocol_error_job)


async def _protocol_error_job(task: TaskContext) -> Any:
    await anyio.sleep(0.1)
    raise m.MrtrError("the job's backend is unavailable", code=m.ErrorCode.INTERNAL_ERROR)


def _confirm_delete_ask(filename: str) -> m.wire.ElicitFormRequest:
    return m.server.elicit_form(
        f"Delete {filename}?", {"confirm": {"type": "boolean"}}, required=["confirm"]
    )


@fixtures.tool(task="optional")
def confirm_delete(ctx: Context, filename: str) -> Any:
    """Asks for a confirmation in the middle of its task, then deletes (pretends to)."""
    return ctx.run_task(_confirm_delete, filename)


async def _confirm_delete(task: TaskContext, filename: str) -> str:
    answer = await task.wait_for_answer("confirm", _confirm_delete_ask(filename))
    if _form(answer).get("confirm") is True:
        return f"Deleted {filename}."
    return f"Kept {filename}."


MULTI_NAME = m.server.elicit_form(
    "What is your name?",
    {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
    required=["name"],
)
MULTI_CONFIRM = m.server.elicit_form(
    "Proceed?", {"name": {"type": "string"}, "confirm": {"type": "boolean"}}, required=["confirm"]
)


@fixtures.tool(task="optional")
def multi_input(ctx: Context) -> Any:
    """Its task asks two questions at once (both outstanding until each is answered)."""
    return ctx.run_task(_multi_input)


async def _multi_input(task: TaskContext) -> str:
    answers = await task.wait_for({"name": MULTI_NAME, "confirm": MULTI_CONFIRM})
    name = _form(answers.get("name", MULTI_NAME)).get("name")
    confirmed = _form(answers.get("confirm", MULTI_CONFIRM)).get("confirm")
    return f"name={name}, confirmed={confirmed}"


@fixtures.tool(task="required")
def test_tool_with_task(ctx: Context) -> Any:
    """Asks the user's name by an input_required round, then greets them from a task."""
    name = ctx.answer("user_name", USER_NAME)
    if name is None:
        return ctx.ask({"user_name": USER_NAME})
    return ctx.run_task(_greet_from_task, _form(name).get("name", "stranger"))


async def _greet_from_task(task: TaskContext, name: str) -> str:
    await task.status(f"greeting {name}")
    return f"Hello, {name}! (from a task)"


# --- resources --------------------------------------------------------------------------------


@fixtures.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text(ctx: Context) -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@fixtures.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary(ctx: Context) -> bytes:
    """A static binary resource (a 1x1 red PNG)."""
    return base64.b64decode(RED_PIXEL)


@fixtures.resource(
    "test://watched-resource",
    name="watched-resource",
    mime_type="text/plain",
    ttl_ms=0,  # changes whenever test_trigger_resource_update runs
)
def watched_resource(ctx: Context) -> str:
    """Changes with test_trigger_resource_update: subscribe to it on subscriptions/listen."""
    return f"Watched resource content, revision {watched['revision']}"


@fixtures.resource_template(
    "test://template/{id}/data", name="template-data", mime_type="application/json"
)
def template_data(ctx: Context) -> str:
    """Data for an id: the template variable is substituted into the content."""
    ident = ctx.uri_params["id"]
    return f'{{"id":"{ident}","templateTest":true,"data":"Data for ID: {ident}"}}'


# --- prompts ----------------------------------------------------------------------------------


@fixtures.prompt()
def test_simple_prompt(ctx: Context) -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@fixtures.prompt(
    arguments=[
        {"name": "arg1", "description": "First test argument", "required": True},
        {"name": "arg2", "description": "Second test argument", "required": True},
    ]
)
def test_prompt_with_arguments(ctx: Context) -> str:
    """A prompt with two required arguments, substituted into its text."""
    args = ctx.arguments
    return f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"


@fixtures.prompt(
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


@fixtures.prompt()
def test_prompt_with_image(ctx: Context) -> list[Any]:
    """A prompt with an image."""
    return [{"role": "user", "content": image()}, "Please analyze the image above."]


PROMPT_CONTEXT = m.server.elicit_form(
    "What context should the prompt use?", {"context": {"type": "string"}}, required=["context"]
)


@fixtures.prompt()
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


@fixtures.completion()
def complete(ctx: Context) -> list[str]:
    """Suggestions for the prompt arguments and the template variable, by prefix."""
    ref, argument = ctx.params["ref"], ctx.params["argument"]
    target = ref.get("name") if ref["type"] == "ref/prompt" else ref.get("uri")
    prefix = argument["value"]
    return [v for v in SUGGESTIONS.get((target, argument["name"]), []) if v.startswith(prefix)]


# --- reading answers ----------------------------------------------------------------------


def _form(answer: m.wire.InputResponse | None) -> dict[str, Any]:
    """An elicitation's accepted content (``{}`` when declined, cancelled or empty)."""
    if isinstance(answer, m.wire.ElicitResult) and answer.action == "accept" and answer.content:
        return dict(answer.content)
    return {}
