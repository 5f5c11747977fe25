"""Era control: ``era=``, the verdict a client learns and ``prior=`` to skip the probe,
and a stdio probe that survives a 2025 server which exits on ``server/discover``.

The peers are real subprocesses: tests/support/stdio_2025_strict.py (a 2025-only
server that exits on any method it does not know) and our own ``mrtr serve --stdio``
of the examples app (2026-07-28).  Each logs what it read, so the tests assert
from the wire which handshake went out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.client.era import EraControl
from mrtr_transports.client.errors import CallError
from mrtr_transports.client.stdio import open_stdio_client

import mrtr_core as m
from mrtr_core import Verdict

pytestmark = pytest.mark.subprocess

SUPPORT = Path(__file__).resolve().parents[2] / "support"
STRICT = str(SUPPORT / "stdio_2025_strict.py")
MODERN_ONLY = str(SUPPORT / "modern_only_stdio.py")
ANSWER_TIMEOUT = str(SUPPORT / "legacy_timeout_stdio.py")


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    return m.wire.ElicitResult(action="accept", content={"name": "Ada"})


def wire(log: Path) -> list[tuple[int, str | None]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [(entry["pid"], entry["method"]) for entry in map(json.loads, lines)]


async def test_a_server_that_dies_of_the_probe_is_restarted_and_initialized(
    tmp_path: Path,
) -> None:
    log = tmp_path / "wire.ndjson"
    env = {"MRTR_WIRE_LOG": str(log)}
    with trio.fail_after(20):
        async with open_stdio_client([sys.executable, STRICT], env=env, answer=answer) as client:
            assert (client.era, client.protocol_version) == ("legacy", "2025-11-25")
            result = await client.call_tool("greet")
            assert result["content"][0]["text"] == "hello Ada"
            verdict = client.verdict
            assert client.link.spawns == 2
    assert verdict == Verdict(era="legacy", protocol_version="2025-11-25", probe_kills=True)
    seen = wire(log)
    first_pid = seen[0][0]
    assert seen[0] == (first_pid, "server/discover")  # the probe killed the first child
    assert all(pid != first_pid for pid, _ in seen[1:])
    assert [method for _, method in seen[1:]][:2] == ["initialize", "notifications/initialized"]

    # Passed back in, the verdict skips the probe: one child, straight to initialize.
    log.unlink()
    with trio.fail_after(20):
        async with open_stdio_client(
            [sys.executable, STRICT], env=env, answer=answer, prior=verdict
        ) as client:
            assert (await client.call_tool("greet"))["content"][0]["text"] == "hello Ada"
            assert client.link.spawns == 1
            assert client.verdict == verdict
    assert "server/discover" not in [method for _, method in wire(log)]


async def test_era_legacy_never_probes(tmp_path: Path) -> None:
    log = tmp_path / "wire.ndjson"
    with trio.fail_after(20):
        async with open_stdio_client(
            [sys.executable, STRICT], env={"MRTR_WIRE_LOG": str(log)}, era="legacy", answer=answer
        ) as client:
            assert client.era == "legacy"
            assert client.verdict == Verdict(era="legacy", protocol_version="2025-11-25")
    assert [method for _, method in wire(log)][:1] == ["initialize"]
    assert client.link.spawns == 1


async def test_era_modern_to_a_2025_server_fails_without_a_second_chance(
    tmp_path: Path,
) -> None:
    # No prior: era="modern" is the caller's word, not a remembered guess.
    with trio.fail_after(20), pytest.raises(CallError) as caught:
        async with open_stdio_client([sys.executable, STRICT], era="modern") as client:
            await client.call_tool("greet")
    assert caught.value.code == -32600


async def test_a_wrong_modern_prior_probes_once_and_recovers(tmp_path: Path) -> None:
    # The server "changed" to a 2025-only one: the remembered modern era fails on the first
    # request (-32600: no session), the client starts over with one probe, which that
    # server dies of too, so it is started again and initialized: the call then completes.
    prior = Verdict(era="modern", protocol_version="2026-07-28")
    log = tmp_path / "wire.ndjson"
    with trio.fail_after(20):
        async with open_stdio_client(
            [sys.executable, STRICT], env={"MRTR_WIRE_LOG": str(log)}, prior=prior, answer=answer
        ) as client:
            assert client.era == "modern"  # opened at once: no probe
            assert (await client.call_tool("greet"))["content"][0]["text"] == "hello Ada"
            assert client.verdict == Verdict(
                era="legacy", protocol_version="2025-11-25", probe_kills=True
            )
            assert client.link.spawns == 2
    methods = [method for _, method in wire(log)]
    assert methods[:3] == ["tools/call", "server/discover", "initialize"]


async def test_a_wrong_legacy_prior_probes_once_and_recovers() -> None:
    # A 2026-07-28-only server refuses initialize (naming its versions): the remembered
    # 2025 era is wrong, so the client probes once and goes on in 2026-07-28.
    prior = Verdict(era="legacy", protocol_version="2025-11-25")
    with trio.fail_after(20):
        async with open_stdio_client([sys.executable, MODERN_ONLY], prior=prior) as client:
            assert (client.era, client.protocol_version) == ("modern", "2026-07-28")
            assert client.verdict == Verdict(era="modern", protocol_version="2026-07-28")
            result = await client.call_tool("echo", {"text": "still here"})
            assert "still here" in json.dumps(result)


async def test_a_2025_client_hears_the_versions_a_modern_only_server_speaks() -> None:
    with trio.fail_after(20), pytest.raises(CallError) as caught:
        async with open_stdio_client([sys.executable, MODERN_ONLY], era="legacy"):
            raise AssertionError("opened a 2025 session")
    assert caught.value.code == m.ErrorCode.METHOD_NOT_FOUND
    assert "2026-07-28" in caught.value.message
    assert caught.value.data == {"supported": ["2026-07-28"]}


async def test_a_question_a_2025_client_never_answers_does_not_hold_the_request() -> None:
    # The server's legacy shim asks (elicitation/create); our handler never answers.
    # Past the server's legacy_answer_timeout the question is withdrawn and the call
    # fails with -32603: the request is not held for ever.
    withdrawn = trio.Event()

    async def never(key: str, request: m.wire.InputRequest) -> Any:
        try:
            await trio.sleep_forever()
        finally:
            withdrawn.set()

    with trio.fail_after(20):
        async with open_stdio_client(
            [sys.executable, ANSWER_TIMEOUT, "0.3"], era="legacy", answer=never
        ) as client:
            with pytest.raises(CallError) as caught:
                await client.call_tool("trip", {})
            await withdrawn.wait()
    assert caught.value.code == m.ErrorCode.INTERNAL_ERROR
    assert "did not answer in time" in caught.value.message


def test_verdicts_round_trip_through_json_and_refuse_bad_input() -> None:
    verdict = Verdict(era="legacy", protocol_version="2025-06-18", probe_kills=True)
    assert Verdict.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict
    modern = Verdict(era="modern", protocol_version="2026-07-28")
    assert modern.to_json() == {"era": "modern", "protocolVersion": "2026-07-28"}
    for bad in (
        [],
        {"era": "modern"},
        {"era": "future", "protocolVersion": "2026-07-28"},
        {"era": "modern", "protocolVersion": "2025-11-25"},
        {"era": "legacy", "protocolVersion": "2025-11-25", "probeKills": "yes"},
    ):
        with pytest.raises(m.LocalProtocolError):
            Verdict.from_json(bad)


def test_era_control_orders_the_prior_version_first_and_refuses_nonsense() -> None:
    control = EraControl("auto", Verdict(era="legacy", protocol_version="2025-03-26"))
    assert control.era == "legacy"
    assert control.versions()[:2] == ("2025-03-26", "2026-07-28")
    assert EraControl("auto", None).versions() == m.ALL_VERSIONS
    with pytest.raises(ValueError):
        EraControl("2025", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        EraControl("auto", {"era": "legacy"})  # type: ignore[arg-type]
    # A modern prior: only what a 2025 server answers earns the second chance, once.
    control = EraControl("auto", Verdict(era="modern", protocol_version="2026-07-28"))
    assert control.after_first_failure(CallError(-32602, "bad arguments")) is None
    assert control.after_first_failure(CallError(-32601, "no such method")) == "auto"
    assert control.after_first_failure(CallError(-32601, "no such method")) is None
