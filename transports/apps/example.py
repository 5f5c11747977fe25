"""The example server ``mrtr serve`` runs by default: :func:`build_example_app`.

The model: one :class:`~mrtr_transports.apps.mcp_app.McpApp` with real examples
only, each a tool that asks the user for input over multi round-trip requests
(``docs/server.md``):

* ``weather`` asks a city and the units, then (when the client can sample) a
  tone from the client's LLM;
* ``plan_trip`` asks in two rounds: who travels, then for how long (``make demo``);
* ``deploy`` asks for a confirmation that must really have been asked
  (``require_proof=True``), then runs a side effect guarded by ``ctx.once``, so
  it happens at most once however the legs are replayed;
* ``connect_provider`` (:mod:`.example_auth`) signs in to a demo provider through
  URL elicitation (``mrtr serve --http`` only: it needs the callback);
* ``build_report`` is long-running work handed to a task (SEP-2663, ``task="optional"``):
  it reports its progress in the task's status message, asks mid-task whether to
  publish (the task is ``input_required`` until ``tasks/update`` answers), then
  completes.  It needs a client that declares the tasks extension: to one that does
  not, its question is -32021 naming the extension.

The tools are plain functions; :func:`build_example_app` makes an app and
registers them (``mrtr serve`` with no ``--app`` calls it), and ``app`` is one
built at import, for ``--app mrtr_transports.apps.example:app`` and for code
that imports it.

**When the user says no.**  Each question can be accepted, declined (the user
said no) or cancelled (the user dismissed it without choosing).  A tool that
cannot do its job without the answer ends at once with a tool error
(``isError: true``) that says which question was refused and how, e.g. "Trip not
planned: you declined to answer 'Who is travelling?'."  A tool error, not a plain
text, because the tool did not do what it was called to do: the model reads the
result and must not report a planned trip or a deployment that did not happen,
and ``mrtr call`` exits 1, so a script does not go on as if it had.  Not a
JSON-RPC error either: nothing is wrong with the request, and the spec keeps
those for protocol failures (a model cannot see them).  Asking again instead
would pester a user who has just said no.

The conformance suite's fixtures (``test_*`` tools, ``test://`` resources, ...)
are a separate app, kept with the tests: ``tests/support/conformance_app.py``.

Sampling is deprecated in protocol 2026-07-28 (SEP-2577; it keeps working for
at least twelve months): ``weather`` says so in its description.  Every handler
is a plain re-entrant function; state across rounds travels sealed in
``requestState``, so any process with the app's keys could serve any leg
(``build_report``'s task lives in this process's task store).
"""

from __future__ import annotations

from typing import Any

import anyio

import mrtr_core as m

from . import example_auth
from .context import Context
from .mcp_app import McpApp
from .results import tool_error
from .task_runs import TaskContext

__all__ = [
    "CONFIRM_DEPLOY",
    "PUBLISH_REPORT",
    "app",
    "build_example_app",
    "build_report",
    "deploy",
    "deployments",
    "plan_trip",
    "refused",
    "weather",
]

DEPRECATED = "Deprecated in 2026-07-28 (SEP-2577), still served"


# --- reading answers ----------------------------------------------------------------------


def refused(
    answer: m.wire.InputResponse, asked: m.wire.ElicitFormRequest, outcome: str
) -> dict[str, Any] | None:
    """The tool error that ends a tool when the user declined or cancelled ``asked``.

    ``outcome`` says what did not happen ("Trip not planned"); ``None`` when the
    user accepted (read the answer then).
    """
    if not isinstance(answer, m.wire.ElicitResult) or answer.action == "accept":
        return None
    if answer.action == "decline":
        return tool_error(f"{outcome}: you declined to answer {asked.message!r}.")
    return tool_error(f"{outcome}: you dismissed {asked.message!r} without answering.")


def accepted(answer: m.wire.InputResponse, field: str) -> Any:
    """An accepted form's ``field`` (the app checked the content against the schema)."""
    content = answer.content if isinstance(answer, m.wire.ElicitResult) else None
    return (content or {}).get(field)


def sampled_text(answer: m.wire.InputResponse, default: str) -> str:
    """The text the client's LLM sent, or ``default`` when it sent something else."""
    if isinstance(answer, m.wire.CreateMessageResult):
        content = answer.content
        if isinstance(content, dict) and isinstance(content.get("text"), str):
            return str(content["text"])
    return default


# --- weather: two questions, then the client's LLM when it can sample ----------------------

CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = m.server.elicit_form(
    "Units?", {"units": {"type": "string", "enum": ["C", "F"]}}, required=["units"]
)
TONE = m.server.sample("Describe sunshine in three words", max_tokens=10)
NO_FORECAST = "No forecast"


WEATHER_DESCRIPTION = (
    "The weather in a city: asks the city, then the units, then (if the client "
    f"can sample; sampling: {DEPRECATED}) a tone from the client's LLM."
)


def weather(ctx: Context) -> Any:
    state = ctx.state or {}
    if "city" not in state:
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})
        if (error := refused(city, CITY, NO_FORECAST)) is not None:
            return error
        return ctx.ask({"units": UNITS}, state={"city": accepted(city, "city")})
    if "units" not in state:
        units = ctx.answer("units", UNITS)
        if units is None:
            return ctx.ask({"units": UNITS}, state=state)
        if (error := refused(units, UNITS, NO_FORECAST)) is not None:
            return error
        state = {**state, "units": accepted(units, "units")}
        if ctx.can_ask(TONE):
            return ctx.ask({"tone": TONE}, state=state)
        return _forecast(state, "sunny")  # no sampling declared: do without the flourish
    tone = ctx.answer("tone", TONE)
    if tone is None:
        return ctx.ask({"tone": TONE}, state=state)
    return _forecast(state, sampled_text(tone, "sunny"))


def _forecast(state: dict[str, Any], tone: str) -> str:
    degrees = 21 if state["units"] == "C" else 70
    return f"{state['city']}: {degrees} {state['units']}, {tone}"


# --- plan_trip: two rounds of questions -----------------------------------------------------

TRAVELLER = m.server.elicit_form(
    "Who is travelling?", {"name": {"type": "string"}}, required=["name"]
)
NIGHTS = m.server.elicit_form(
    "How many nights?",
    {"nights": {"type": "integer", "minimum": 1, "maximum": 30}},
    required=["nights"],
)
NO_TRIP = "Trip not planned"


PLAN_TRIP_SCHEMA = {
    "type": "object",
    "properties": {"destination": {"type": "string", "description": "Where to go"}},
    "required": ["destination"],
}


def plan_trip(ctx: Context) -> Any:
    """Plans a trip in two rounds of questions: who travels, then for how long."""
    destination = str(ctx.arguments["destination"])
    state = ctx.state or {}
    if "name" not in state:
        traveller = ctx.answer("traveller", TRAVELLER)
        if traveller is None:
            return ctx.ask({"traveller": TRAVELLER})
        if (error := refused(traveller, TRAVELLER, NO_TRIP)) is not None:
            return error
        return ctx.ask({"nights": NIGHTS}, state={"name": accepted(traveller, "name")})
    nights = ctx.answer("nights", NIGHTS)
    if nights is None:
        return ctx.ask({"nights": NIGHTS}, state=state)
    if (error := refused(nights, NIGHTS, NO_TRIP)) is not None:
        return error
    return f"Trip to {destination} for {state['name']}: {accepted(nights, 'nights')} nights."


# --- deploy: a confirmation, then a side effect at most once --------------------------------

CONFIRM_DEPLOY = m.server.elicit_form(
    "Deploy now?", {"confirm": {"type": "boolean"}}, required=["confirm"]
)
#: What ``deploy`` did, oldest first (bounded: the example keeps the last 100).
deployments: list[str] = []


DEPLOY_SCHEMA = {
    "type": "object",
    "properties": {"env": {"type": "string", "description": "Where to deploy"}},
}


def deploy(ctx: Context) -> Any:
    """Deploys after the user confirms; the deployment runs at most once per call."""
    # The sealed state is bound to these arguments: a retry cannot switch the env.
    env = str(ctx.arguments.get("env", "staging"))
    answer = ctx.answer("confirm", CONFIRM_DEPLOY)
    if answer is None:
        return ctx.ask({"confirm": CONFIRM_DEPLOY})
    if (error := refused(answer, CONFIRM_DEPLOY, f"Not deployed to {env}")) is not None:
        return error
    if accepted(answer, "confirm") is not True:
        return tool_error(f"Not deployed to {env}: you answered no to 'Deploy now?'.")
    if ctx.once("deploy"):  # the redeemed state was spent first: a replay cannot redo it
        deployments.append(env)
        del deployments[:-100]
    return f"Deployed to {env}."


# --- build_report: long work in a task, a question in the middle ---------------------------

PUBLISH_REPORT = m.server.elicit_form(
    "Publish the report?",
    {
        "publish": {"type": "boolean"},
        "title": {"type": "string", "maxLength": 80, "description": "Its title"},
    },
    required=["publish"],
)
#: Seconds of (pretend) work per row: long enough to poll, short enough to try.
SECONDS_PER_ROW = 0.5

BUILD_REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "rows": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Rows to build"}
    },
}


def build_report(ctx: Context) -> Any:
    """Builds a report row by row in a task, then asks whether to publish it."""
    rows = int(ctx.arguments.get("rows", 3))
    return ctx.run_task(_build_report, rows)


async def _build_report(task: TaskContext, rows: int) -> Any:
    for row in range(1, rows + 1):
        await task.status(f"building row {row} of {rows}")
        await anyio.sleep(SECONDS_PER_ROW)
    await task.status(f"{rows} rows built: waiting for your answer")
    answer = await task.wait_for_answer("publish", PUBLISH_REPORT)
    if (error := refused(answer, PUBLISH_REPORT, "Report not published")) is not None:
        return error
    if accepted(answer, "publish") is not True:
        return tool_error("Report not published: you answered no to 'Publish the report?'.")
    title = accepted(answer, "title") or "Report"
    return f"Published {title!r}: {rows} rows."


# --- the app ------------------------------------------------------------------------------


def build_example_app() -> McpApp:
    """A new example app with every example tool registered."""
    app = McpApp(
        "mrtr-example",
        "0.1.0",
        title="mrtr example server",
        instructions=(
            "Example tools that ask the user for input over multi round-trip requests: "
            "weather, plan_trip, deploy, connect_provider (a URL sign-in, over HTTP) and "
            "build_report (a task: long work, a question in the middle). "
            "Each ends with a tool error when the user declines or cancels a question."
        ),
        # Lists are the same for every caller: cacheable by anyone for a minute.
        cache_ttl_ms=60_000,
        cache_scope="public",
    )
    app.add_tool(weather, description=WEATHER_DESCRIPTION)
    app.add_tool(plan_trip, input_schema=PLAN_TRIP_SCHEMA)
    app.add_tool(
        deploy,
        input_schema=DEPLOY_SCHEMA,
        annotations={"destructiveHint": True, "idempotentHint": False},
        # A confirmation no sealed state proves was asked reads as missing: a client that
        # invents ``inputResponses.confirm`` on the first call is simply asked.
        require_proof=True,
    )
    example_auth.add_to(app)
    app.add_tool(build_report, input_schema=BUILD_REPORT_SCHEMA, task="optional")
    return app


#: The example app, built once at import (``--app mrtr_transports.apps.example:app``).
app = build_example_app()
