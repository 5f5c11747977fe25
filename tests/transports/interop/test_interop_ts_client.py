"""The official TypeScript SDK v2 client (`@modelcontextprotocol/client` 2.4.0) against mrtr serve.

``tests/support/ts/peer_client.mjs`` connects to ``mrtr serve`` (the conformance fixtures app)
over stdio (the SDK spawns it) or Streamable HTTP, in 2026-07-28 mode (pinned),
``auto`` (the ``server/discover`` probe) or legacy (2025 ``initialize``).  It
calls the app's MRTR fixtures with elicitation, sampling and roots handlers
that answer deterministically and prints what it saw.  In 2026-07-28 the SDK
fulfils our ``input_required`` rounds and retries with the echoed
``requestState``; in 2025 our legacy shim asks those handlers with real
server-to-client requests.  The texts below depend on the answers given, so a
lost or misrouted answer fails them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.ts_peers import MRTR_SERVE, ClientRun, mrtr_http_server, run_ts_client

NAME = ["elicitation", "What is your name?"]
#: Tool (or prompt) -> (its text, the questions the client's handlers got, in order).
EXPECTED: dict[str, tuple[str, list[list[Any]]]] = {
    "test_input_required_result_elicitation": ("Hello, Ada!", [NAME]),
    "test_input_required_result_sampling": ("The model answered: Paris", [["sampling", 100]]),
    "test_input_required_result_list_roots": (
        "Client roots: file:///ts/workspace",
        [["roots", None]],
    ),
    "test_input_required_result_multi_round": (
        "Ada likes teal.",
        [
            ["elicitation", "Step 1: What is your name?"],
            ["elicitation", "Step 2: What is your favorite color?"],
        ],
    ),
    "test_input_required_result_request_state": (
        "state-ok: confirmed=True",
        [["elicitation", "Please confirm"]],
    ),
    "test_input_required_result_multiple_inputs": (
        "Paris Ada (1 roots)",
        [NAME, ["sampling", 50], ["roots", None]],
    ),
    "test_input_required_result_prompt": (
        "Use this context: interop",
        [["elicitation", "What context should the prompt use?"]],
    ),
}
#: Input rounds of each call on 2026-07-28 (multi_round asks in two rounds).
ROUNDS = {"test_input_required_result_multi_round": 2}


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with mrtr_http_server() as url:
        yield url


def target(transport: str, request: pytest.FixtureRequest) -> list[str]:
    """``mrtr serve`` over stdio (the SDK spawns it), or the module's HTTP server's URL."""
    if transport == "stdio":
        return ["stdio", *MRTR_SERVE]
    return [request.getfixturevalue("http_url")]


def check_headers(run: ClientRun, transport: str) -> None:
    """Over HTTP the SDK mirrored ``region`` into ``Mcp-Param-Region`` (base64 for non-ASCII)
    and our server found it equal to the argument (it refuses a mismatch with -32020)."""
    found = [record for record in run.records if record["step"] == "headers"]
    if transport == "stdio":
        assert found == []
    else:
        assert found == [{"step": "headers", "text": "region=Zürich"}]


def check_modern(run: ClientRun) -> None:
    connect = run.step("connect")
    assert (connect["era"], connect["version"]) == ("modern", "2026-07-28")
    assert connect["server"]["name"] == "mrtr-conformance"
    calls = run.calls()
    assert set(calls) == set(EXPECTED)
    for name, (text, asked) in EXPECTED.items():
        call = calls[name]
        assert (call.get("text"), call["asked"]) == (text, asked), call
        rounds = ROUNDS.get(name, 1)
        assert call["legs"] == rounds + 1, call  # the first leg, then one retry per round
        # Every retry carried, byte for byte, the sealed state of the result it answers.
        assert len(call["echoes"]) == rounds
        for echo in call["echoes"]:
            assert echo["echoed"] is True and echo["state"].startswith("mrtr1."), echo
    # A retry whose sealed state changed by one character is refused; the honest one passes.
    tamper = run.step("tamper")
    assert tamper["resultType"] == "input_required"
    assert tamper["error"]["code"] == -32602, tamper
    assert tamper["honest"] == "state verified"


def check_legacy(run: ClientRun) -> None:
    connect = run.step("connect")
    assert (connect["era"], connect["version"]) == ("legacy", "2025-11-25")
    assert connect["server"]["name"] == "mrtr-conformance"
    calls = run.calls()
    assert set(calls) == set(EXPECTED)
    for name, (text, asked) in EXPECTED.items():
        call = calls[name]
        # One request per call: our shim asked every question as a server-to-client request.
        assert (call.get("text"), call["asked"], call["legs"]) == (text, asked, 1), call
        assert call["echoes"] == []  # no input_required result ever reaches a 2025 client
    assert not [record for record in run.records if record["step"] == "tamper"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_2026_client_completes_every_mrtr_fixture(
    transport: str, request: pytest.FixtureRequest
) -> None:
    run = run_ts_client("2026", target(transport, request))
    check_modern(run)
    check_headers(run, transport)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_auto_client_probes_and_picks_2026(transport: str, request: pytest.FixtureRequest) -> None:
    run = run_ts_client("auto", target(transport, request))
    check_modern(run)
    check_headers(run, transport)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_legacy_client_is_asked_through_our_shim(
    transport: str, request: pytest.FixtureRequest
) -> None:
    run = run_ts_client("legacy", target(transport, request))
    check_legacy(run)
    if transport == "http":  # 2025 has no header mirroring: the plain call must still work
        assert [r for r in run.records if r["step"] == "headers"] == [
            {"step": "headers", "text": "region=Zürich"}
        ]
