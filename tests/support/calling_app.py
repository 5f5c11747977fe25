"""An app for the client commands' tests: ``--app support.calling_app:app``.

What ``mrtr call``/``get-prompt``/``read``/``list`` must carry and show, each
in one entry: progress and log lines (``busy``, one line with control
characters in it), three questions in one round in an order that is neither
alphabetical nor anything a hash would keep (``three_questions``), roots
(``where``), a prompt and a resource that each ask before they answer
(``briefing``, ``notes://today``) and a tool with a described input schema
(``plan``).
"""

from __future__ import annotations

import shlex
from typing import Any

from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp

import mrtr_core as m
from support.cli_run import MRTR, TESTS_ON_PATH

app = McpApp("calling", "1.0")
#: This app served over stdio, as a ``mrtr call`` TARGET (``tests/`` on the server's path).
STDIO_TARGET = (
    "stdio:"
    + shlex.join(["env", f"PYTHONPATH={TESTS_ON_PATH['PYTHONPATH']}", *MRTR])
    + " serve --stdio --app support.calling_app:app"
)


def _form(answer: m.wire.InputResponse | None) -> dict[str, Any]:
    if isinstance(answer, m.wire.ElicitResult) and answer.action == "accept" and answer.content:
        return dict(answer.content)
    return {}


@app.tool(description="Reports progress 1..3 of 3 and logs at debug, info and warning.")
async def busy(ctx: Context) -> str:
    for step in (1, 2, 3):
        await ctx.progress(step, 3, f"step {step}")
    await ctx.log("debug", "fine detail", logger="busy")
    await ctx.log("info", {"stage": "middle"}, logger="busy")
    await ctx.log("warning", "red \x1b[31malert\x1b[0m\nsecond line", logger="busy")
    return "busy done"


#: Keys in an order sorting would change, each a one-field form.
QUESTION_KEYS = ("zeta", "alpha", "mid")
QUESTIONS = {
    key: m.server.elicit_form(f"Question {key}?", {key: {"type": "string"}}, required=[key])
    for key in QUESTION_KEYS
}


@app.tool(description="Asks three questions in one round, then says the answers in that order.")
def three_questions(ctx: Context) -> Any:
    answers = [ctx.answer(key, QUESTIONS[key]) for key in QUESTION_KEYS]
    if any(answer is None for answer in answers):
        return ctx.ask(dict(QUESTIONS))
    return " ".join(str(_form(a).get(k)) for k, a in zip(QUESTION_KEYS, answers, strict=True))


ROOTS = m.server.list_roots()


@app.tool(description="Lists the client's roots.")
def where(ctx: Context) -> Any:
    answer = ctx.answer("roots", ROOTS)
    if answer is None:
        return ctx.ask({"roots": ROOTS})
    assert isinstance(answer, m.wire.ListRootsResult)
    return " ".join(root.uri for root in answer.roots) or "(no roots)"


@app.tool(
    description="Plans a trip.",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Where to go"},
            "days": {"type": "integer", "default": 2},
            "mode": {"enum": ["train", "bus"]},
        },
        "required": ["city"],
    },
)
def plan(ctx: Context) -> str:
    return f"{ctx.arguments['city']} for {ctx.arguments.get('days', 2)} days"


AUDIENCE = m.server.elicit_form(
    "Who is the briefing for?", {"audience": {"type": "string"}}, required=["audience"]
)


@app.prompt(arguments=[{"name": "topic", "description": "What about", "required": True}])
def briefing(ctx: Context) -> Any:
    """A briefing prompt: asks who it is for first."""
    answer = ctx.answer("audience", AUDIENCE)
    if answer is None:
        return ctx.ask({"audience": AUDIENCE})
    return f"Brief {_form(answer).get('audience')} on {ctx.arguments['topic']}."


DAY = m.server.elicit_form("Which day?", {"day": {"type": "string"}}, required=["day"])


@app.resource("notes://today", name="today", mime_type="text/plain")
def today(ctx: Context) -> Any:
    """Today's notes: asks which day first."""
    answer = ctx.answer("day", DAY)
    if answer is None:
        return ctx.ask({"day": DAY})
    return f"Notes for {_form(answer).get('day')}"
