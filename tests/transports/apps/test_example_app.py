"""The example app (``mrtr_transports.apps.example``): real examples only.

Each tool runs whole multi round-trip flows through a client and a server
``Connection`` (accepted, declined and cancelled questions); the weather tool
also serves a 2025-era client through ``LegacyShim``; and ``mrtr call`` drives
the tools of a real ``mrtr serve`` subprocess (stdio and HTTP) with
``--answer`` / ``--decline-all``, exit codes included.  The conformance
fixtures are another app (``tests/transports/testing/test_conformance_app.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import trio
from mrtr_transports.apps import example as example_app
from mrtr_transports.apps.example import app
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.client.http import open_http_client
from support.cli_run import STDIO_EXAMPLE, Ran, mrtr_all
from support.pairing import handshake
from support.url_browser import mrtr_serve_http
from test_mcp_app import RecordingOutlet, accept, call, error_of, retry_params, serve_call

import mrtr_core as m

EXAMPLES = ["weather", "plan_trip", "deploy", "connect_provider", "build_report"]


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "test-model"}


def text_of(result: Mapping[str, Any]) -> str:
    return str(result["content"][0]["text"])


# --- what a user sees ----------------------------------------------------------------------------


async def test_the_example_app_lists_only_its_real_examples() -> None:
    listed = await call(app, "tools/list")
    assert [tool["name"] for tool in listed["tools"]] == EXAMPLES
    assert all(tool.get("description") for tool in listed["tools"])
    # No conformance fixture anywhere: no prompts, resources or completion either.
    # (and the tasks extension, for build_report)
    assert set(app.capabilities) == {"tools", "logging", "extensions"}
    assert app.capabilities["extensions"] == {m.tasks.TASKS_EXTENSION: {}}
    error = await error_of(app, "prompts/list")
    assert error.code == m.ErrorCode.METHOD_NOT_FOUND
    assert app.info["name"] == "mrtr-example"
    assert app.instructions is not None and "test_" not in app.instructions
    assert (listed["ttlMs"], listed["cacheScope"]) == (60_000, "public")


def test_sampling_says_it_is_deprecated() -> None:
    description = app.tools["weather"].description
    assert description is not None and "Deprecated in 2026-07-28" in description


# --- the examples, answered ---------------------------------------------------------------------


def weather_user(key: str, request: m.wire.InputRequest) -> Any:
    return {
        "city": accept({"city": "Oslo"}),
        "units": accept({"units": "C"}),
        "tone": assistant("warm and bright"),
    }[key]


async def test_weather_takes_three_rounds_with_sampling() -> None:
    served = await serve_call(app, "tools/call", {"name": "weather", "arguments": {}}, weather_user)
    assert served.result is not None and text_of(served.result) == "Oslo: 21 C, warm and bright"
    assert served.rounds == [("city",), ("units",), ("tone",)]


async def test_weather_does_without_sampling_when_the_client_cannot_sample() -> None:
    served = await serve_call(
        app,
        "tools/call",
        {"name": "weather", "arguments": {}},
        weather_user,
        capabilities={"elicitation": {}},
    )
    assert served.result is not None and text_of(served.result) == "Oslo: 21 C, sunny"
    assert served.rounds == [("city",), ("units",)]
    no_forms = await serve_call(
        app, "tools/call", {"name": "weather", "arguments": {}}, capabilities={"sampling": {}}
    )
    assert (
        no_forms.error is not None and no_forms.error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
    )


async def test_deploy_happens_once_and_only_when_confirmed() -> None:
    example_app.deployments.clear()
    yes = await serve_call(
        app,
        "tools/call",
        {"name": "deploy", "arguments": {"env": "prod"}},
        lambda k, r: accept({"confirm": True}),
    )
    assert yes.result is not None and text_of(yes.result) == "Deployed to prod."
    no = await serve_call(
        app,
        "tools/call",
        {"name": "deploy", "arguments": {"env": "prod"}},
        lambda k, r: {"action": "decline"},
    )
    assert no.result is not None and no.result["isError"] is True
    assert text_of(no.result) == "Not deployed to prod: you declined to answer 'Deploy now?'."
    assert example_app.deployments == ["prod"]
    # A replay of the confirmed leg (a retry after a lost answer, or a captured state) is refused.
    params = {"name": "deploy", "arguments": {"env": "dev"}}
    first = await call(app, "tools/call", params)
    confirmed = retry_params(params, first, {"confirm": accept({"confirm": True})})
    assert text_of(await call(app, "tools/call", confirmed)) == "Deployed to dev."
    replay = await error_of(app, "tools/call", confirmed)
    assert replay.data == {"reason": "replayed"}
    assert example_app.deployments == ["prod", "dev"]


async def test_plan_trip_needs_two_rounds() -> None:
    answers = {"traveller": accept({"name": "Ada"}), "nights": accept({"nights": 3})}
    served = await serve_call(
        app,
        "tools/call",
        {"name": "plan_trip", "arguments": {"destination": "Lisbon"}},
        lambda k, r: answers[k],
    )
    assert (
        served.result is not None and text_of(served.result) == "Trip to Lisbon for Ada: 3 nights."
    )
    assert (served.rounds, served.legs) == ([("traveller",), ("nights",)], 3)
    missing = await call(app, "tools/call", {"name": "plan_trip", "arguments": {}})
    assert missing["isError"] is True


# --- a 2025-era client, through the legacy shim --------------------------------------------------


async def serve_legacy_call(
    app: McpApp,
    params: Mapping[str, Any],
    answers: Mapping[str, Any],
    capabilities: Mapping[str, Any],
) -> tuple[Any, list[str]]:
    """A 2025-era client's tools/call served by ``app`` through ``LegacyShim``;
    returns the client's final event and the methods of the requests it was sent."""
    client = m.Connection(
        m.CLIENT, era="legacy", info={"name": "old", "version": "1"}, capabilities=capabilities
    )
    server = m.Connection(m.SERVER, info=app.info, capabilities=app.capabilities)
    handshake(client, server)
    call_id = client.call("tools/call", params)
    asked: list[str] = []
    shim: m.server.LegacyShim | None = None
    info: m.server.RequestInfo | None = None
    with trio.fail_after(2):
        while True:
            while (event := client.next_event()) is not m.NEED_DATA:
                if isinstance(event, m.Request):  # the server asks, 2025 style
                    asked.append(event.method)
                    answer = answers[event.method]
                    server.receive_data(client.send(m.ResultResponse(id=event.id, result=answer)))
                elif isinstance(event, m.CallEvent) and isinstance(
                    event.event, (m.engine.SendRequest, m.engine.SendRetry)
                ):
                    server.receive_data(client.send(event))
                elif isinstance(event, m.CallEvent) and isinstance(
                    event.event, (m.engine.Done, m.engine.Failed)
                ):
                    assert event.call == call_id
                    return event.event, asked
            while (incoming := server.next_event()) is not m.NEED_DATA:
                if isinstance(incoming, m.Request):
                    info = server.request_info(incoming.id)
                    shim = m.server.LegacyShim(
                        None,
                        incoming,
                        info,
                        new_id=server.new_request_id,
                        sealer=None,
                        principal=None,
                    )
                    shim.start(trio.current_time())
                else:
                    assert shim is not None and isinstance(
                        incoming, (m.ResultResponse, m.ErrorResponse)
                    )
                    shim.receive(incoming, trio.current_time())
                assert shim is not None
                while not isinstance(step := shim.next_event(), m.Wait):
                    if isinstance(step, m.server.ShimRun):
                        assert info is not None  # each leg runs with the original's info
                        try:
                            outcome: Any = await app.handle(step.request, info, RecordingOutlet())
                        except m.MrtrError as exc:
                            outcome = exc
                        shim.leg_done(outcome)
                    elif isinstance(step, m.server.ShimSend):
                        client.receive_data(server.send(step.message))
                    elif isinstance(step, m.server.ShimDone):
                        client.receive_data(server.send(step.response))
                    else:
                        raise AssertionError(f"unexpected {step!r}")


async def test_weather_serves_a_2025_client_through_the_legacy_shim() -> None:
    answers = {
        "elicitation/create": None,  # filled per question below
        "sampling/createMessage": assistant("warm and bright"),
    }
    forms = iter([accept({"city": "Oslo"}), accept({"units": "F"})])

    class Answers(dict[str, Any]):
        def __getitem__(self, method: str) -> Any:
            return next(forms) if method == "elicitation/create" else answers[method]

    final, asked = await serve_legacy_call(
        app, {"name": "weather", "arguments": {}}, Answers(), {"elicitation": {}, "sampling": {}}
    )
    assert isinstance(final, m.engine.Done), final
    assert final.result == {"content": [{"type": "text", "text": "Oslo: 70 F, warm and bright"}]}
    assert asked == ["elicitation/create", "elicitation/create", "sampling/createMessage"]


async def test_a_2025_client_that_declines_gets_the_same_tool_error() -> None:
    final, asked = await serve_legacy_call(
        app,
        {"name": "plan_trip", "arguments": {"destination": "Lisbon"}},
        {"elicitation/create": {"action": "decline"}},
        {"elicitation": {}},
    )
    assert isinstance(final, m.engine.Done), final
    assert final.result == {
        "content": [
            {
                "type": "text",
                "text": "Trip not planned: you declined to answer 'Who is travelling?'.",
            }
        ],
        "isError": True,
    }
    assert asked == ["elicitation/create"]  # nothing more was asked


# --- declined and cancelled questions --------------------------------------------------------

TRIP = {"name": "plan_trip", "arguments": {"destination": "Lisbon"}}
WEATHER = {"name": "weather", "arguments": {}}
DEPLOY = {"name": "deploy", "arguments": {"env": "prod"}}
DECLINE = {"action": "decline"}
CANCEL = {"action": "cancel"}


@pytest.mark.parametrize(
    ("params", "answers", "rounds", "text"),
    [
        (
            TRIP,
            {"traveller": DECLINE},
            1,
            "Trip not planned: you declined to answer 'Who is travelling?'.",
        ),
        (
            TRIP,
            {"traveller": CANCEL},
            1,
            "Trip not planned: you dismissed 'Who is travelling?' without answering.",
        ),
        (
            TRIP,
            {"traveller": accept({"name": "Ada"}), "nights": DECLINE},
            2,
            "Trip not planned: you declined to answer 'How many nights?'.",
        ),
        (
            TRIP,
            {"traveller": accept({"name": "Ada"}), "nights": CANCEL},
            2,
            "Trip not planned: you dismissed 'How many nights?' without answering.",
        ),
        (WEATHER, {"city": DECLINE}, 1, "No forecast: you declined to answer 'Which city?'."),
        (
            WEATHER,
            {"city": accept({"city": "Oslo"}), "units": CANCEL},
            2,
            "No forecast: you dismissed 'Units?' without answering.",
        ),
        (
            DEPLOY,
            {"confirm": CANCEL},
            1,
            "Not deployed to prod: you dismissed 'Deploy now?' without answering.",
        ),
        (
            DEPLOY,
            {"confirm": accept({"confirm": False})},
            1,
            "Not deployed to prod: you answered no to 'Deploy now?'.",
        ),
    ],
    ids=[
        "trip-decline-1",
        "trip-cancel-1",
        "trip-decline-2",
        "trip-cancel-2",
        "weather-decline-1",
        "weather-cancel-2",
        "deploy-cancel",
        "deploy-no",
    ],
)
async def test_a_refused_question_ends_the_tool_with_a_tool_error_that_names_it(
    params: Mapping[str, Any], answers: Mapping[str, Any], rounds: int, text: str
) -> None:
    """Declined (the user said no) or cancelled (dismissed): the tool stops at once, with
    isError and a message saying which question and how, never a result built on None."""
    example_app.deployments.clear()
    served = await serve_call(app, "tools/call", params, lambda key, asked: answers[key])
    assert served.error is None and served.result is not None
    assert served.result["isError"] is True
    assert text_of(served.result) == text
    assert len(served.rounds) == rounds  # nothing more was asked after the refusal
    assert example_app.deployments == []


# --- mrtr call against a real mrtr serve ----------------------------------------------------------


def _answer(key: str, value: Any) -> list[str]:
    return ["--answer", f"{key}={json.dumps(value)}"]


NAMED_ADA = _answer("traveller", accept({"name": "Ada"}))


def _outcome(ran: Ran) -> tuple[int, str]:
    """The exit code and the result's text (stdout is only ever the result)."""
    assert ran.stdout, ran.stderr
    result = ran.json()
    assert ("isError" in result) == (ran.returncode == 1), result
    return ran.returncode, text_of(result)


@pytest.mark.subprocess
async def test_mrtr_call_over_stdio_exits_1_when_the_user_declines() -> None:
    """The issue's case: declining "Who is travelling?" once ended "Trip to Lisbon for None:
    None nights." with exit 0."""
    trip = json.dumps({"destination": "Lisbon"})
    declined, answered = await mrtr_all(
        [
            ["call", "--decline-all", STDIO_EXAMPLE, "plan_trip", trip],
            [
                "call",
                *NAMED_ADA,
                *_answer("nights", accept({"nights": 3})),
                STDIO_EXAMPLE,
                "plan_trip",
                trip,
            ],
        ],
        timeout=30,
    )
    assert _outcome(declined) == (
        1,
        "Trip not planned: you declined to answer 'Who is travelling?'.",
    )
    assert "None" not in declined.stdout
    assert _outcome(answered) == (0, "Trip to Lisbon for Ada: 3 nights.")


@pytest.mark.subprocess
async def test_every_example_over_http_answered_declined_and_cancelled() -> None:
    trip, prod = json.dumps({"destination": "Lisbon"}), json.dumps({"env": "prod"})
    oslo = _answer("city", accept({"city": "Oslo"}))
    async with mrtr_serve_http() as target:
        calls: Sequence[tuple[list[str], tuple[int, str]]] = [
            (
                ["--decline-all", target, "weather"],
                (1, "No forecast: you declined to answer 'Which city?'."),
            ),
            (
                [*oslo, *_answer("units", "cancel"), target, "weather"],
                (1, "No forecast: you dismissed 'Units?' without answering."),
            ),
            (
                [*oslo, *_answer("units", accept({"units": "F"})), target, "weather"],
                (0, "Oslo: 70 F, sunny"),
            ),
            (
                [*_answer("traveller", "cancel"), target, "plan_trip", trip],
                (1, "Trip not planned: you dismissed 'Who is travelling?' without answering."),
            ),
            (
                [*NAMED_ADA, "--decline-all", target, "plan_trip", trip],
                (1, "Trip not planned: you declined to answer 'How many nights?'."),
            ),
            (
                ["--decline-all", target, "deploy", prod],
                (1, "Not deployed to prod: you declined to answer 'Deploy now?'."),
            ),
            (
                [*_answer("confirm", accept({"confirm": False})), target, "deploy", prod],
                (1, "Not deployed to prod: you answered no to 'Deploy now?'."),
            ),
            (
                [*_answer("confirm", accept({"confirm": True})), target, "deploy", prod],
                (0, "Deployed to prod."),
            ),
            (
                ["--decline-all", target, "connect_provider"],
                (1, "Not connected: you did not consent to open the sign-in page."),
            ),
            (
                [*_answer("sign_in", "cancel"), target, "connect_provider"],
                (1, "Not connected: you dismissed the sign-in page without answering."),
            ),
        ]
        runs = await mrtr_all([["call", *argv] for argv, _ in calls], timeout=60)
        async with open_http_client(target) as client:  # what a user of the server sees
            listed = [tool["name"] for tool in await client.list_tools()]
    assert listed == EXAMPLES
    for (argv, expected), ran in zip(calls, runs, strict=True):
        assert _outcome(ran) == expected, (argv, ran.stderr)
        assert "None" not in ran.stdout
