"""State-only legs that wait for a person at a URL are human time, not server time.

After a round whose URL elicitation was accepted, the server answers
requestState-only rounds until its own state (an OAuth callback) says the person
is done: those legs are not counted against ``max_state_only_legs``, are paced up
to ``URL_PACE_CAP``, and are bounded by ``url_wait_timeout`` seconds instead.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import mrtr_core as m

CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
URL = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "Sign in", "url": "https://provider.test/a"},
}
FORM = {
    "method": "elicitation/create",
    "params": {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}},
}
POLL = {"resultType": "input_required", "requestState": "s"}


def events(engine: m.engine.RoundEngine) -> list[Any]:
    out = []
    while not isinstance(event := engine.next_event(), m.Wait):
        out.append(event)
    return out


def engine_after_url_answer(action: str, **options: Any) -> m.engine.RoundEngine:
    engine = m.engine.RoundEngine("tools/call", {"name": "login"}, capabilities=CAPS, **options)
    engine.start(0.0)
    events(engine)
    engine.receive_result(
        {"resultType": "input_required", "inputRequests": {"login": URL}, "requestState": "s"}, 1.0
    )
    events(engine)
    engine.provide("login", m.wire.ElicitResult(action=action), 2.0)  # type: ignore[arg-type]
    assert isinstance(events(engine)[-1], m.engine.SendRetry)
    return engine


def poll(engine: m.engine.RoundEngine, now: float) -> list[Any]:
    engine.receive_result(POLL, now)
    return events(engine)


def test_polls_after_an_accepted_url_are_not_counted_and_pace_up_to_a_second() -> None:
    engine = engine_after_url_answer("accept", max_state_only_legs=2)
    delays = []
    for i in range(30):  # far past max_state_only_legs
        got = poll(engine, 3.0 + i)
        assert isinstance(got[-1], m.engine.SendRetry), got
        delays.append(got[-1].delay)
    assert delays[:6] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]
    assert set(delays[5:]) == {m.engine._engine.URL_PACE_CAP}
    engine.receive_result({"resultType": "complete", "content": []}, 40.0)
    assert isinstance(events(engine)[-1], m.engine.Done)


def test_the_wait_for_the_person_is_bounded_in_seconds() -> None:
    engine = engine_after_url_answer("accept", url_wait_timeout=60.0)
    assert isinstance(poll(engine, 50.0)[-1], m.engine.SendRetry)
    got = poll(engine, 62.5)  # 60.5 s after the answer was sent
    assert got == [m.engine.TimedOut(elapsed=60.5, budget=60.0, limit="input")]
    assert engine.state is m.engine.EngineState.TIMED_OUT


def test_without_a_bound_the_wait_goes_on() -> None:
    engine = engine_after_url_answer("accept", url_wait_timeout=None, max_state_only_legs=0)
    assert isinstance(poll(engine, 100_000.0)[-1], m.engine.SendRetry)


def test_a_declined_url_leaves_polls_counted_as_server_time() -> None:
    engine = engine_after_url_answer("decline", max_state_only_legs=1)
    assert isinstance(poll(engine, 3.0)[-1], m.engine.SendRetry)
    failed = poll(engine, 4.0)[-1]
    assert isinstance(failed, m.engine.Failed)
    assert isinstance(failed.error, m.engine.RoundLimitExceeded)


def test_a_new_input_round_ends_the_wait() -> None:
    engine = engine_after_url_answer("accept", max_state_only_legs=1)
    assert isinstance(poll(engine, 3.0)[-1], m.engine.SendRetry)
    engine.receive_result(
        {"resultType": "input_required", "inputRequests": {"name": FORM}, "requestState": "t"}, 4.0
    )
    events(engine)
    engine.provide("name", m.wire.ElicitResult(action="accept", content={}), 5.0)
    events(engine)
    assert isinstance(poll(engine, 6.0)[-1], m.engine.SendRetry)  # the one allowed
    assert isinstance(poll(engine, 7.0)[-1], m.engine.Failed)  # counted again


def test_the_wait_survives_a_snapshot_and_restore() -> None:
    engine = engine_after_url_answer("accept", url_wait_timeout=60.0, max_state_only_legs=0)
    snap = json.loads(json.dumps(engine.snapshot(30.0)))  # 28 s waited
    assert snap["url_waited"] == 28.0 and snap["options"]["url_wait_timeout"] == 60.0
    restored = m.engine.RoundEngine.restore(snap, 1000.0)
    events(restored)  # the leg re-issued
    assert isinstance(poll(restored, 1020.0)[-1], m.engine.SendRetry)  # 48 s
    assert poll(restored, 1040.0)[-1] == m.engine.TimedOut(elapsed=68.0, budget=60.0, limit="input")


def test_a_snapshot_of_an_older_version_restores_without_a_wait() -> None:
    engine = engine_after_url_answer("accept", max_state_only_legs=0)
    snap = engine.snapshot(3.0)
    for key in ("url_accepted", "url_waited"):
        del snap[key]
    del snap["options"]["url_wait_timeout"]
    restored = m.engine.RoundEngine.restore(snap, 10.0)
    events(restored)
    assert isinstance(poll(restored, 11.0)[-1], m.engine.Failed)  # an ordinary state-only leg


@pytest.mark.parametrize("bad", [0, -1.0, "60", True])
def test_the_bound_is_checked(bad: Any) -> None:
    with pytest.raises(m.LocalProtocolError, match="url_wait_timeout"):
        m.engine.RoundEngine("tools/call", {"name": "t"}, url_wait_timeout=bad)
