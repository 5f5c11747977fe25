"""The task status machine: every (status, event) pair, walked."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_core import LocalProtocolError
from mrtr_core.tasks import TERMINAL_STATUSES, next_status
from mrtr_core.tasks._status import EVENTS, STATUSES, TRANSITIONS

# The whole machine, written out here independently of the module: (status, event) ->
# next status, or None where the pair is refused.
R = None
EXPECTED: dict[str, dict[str, str | None]] = {
    #                 needs_input       input_received  completed    failed    cancel
    "working": dict(
        needs_input="input_required",
        input_received=R,
        completed="completed",
        failed="failed",
        cancel="cancelled",
    ),
    "input_required": dict(
        needs_input="input_required",
        input_received="working",
        completed="completed",
        failed="failed",
        cancel="cancelled",
    ),
    # terminal: only a cancel is taken, and it changes nothing
    "completed": dict(needs_input=R, input_received=R, completed=R, failed=R, cancel="completed"),
    "failed": dict(needs_input=R, input_received=R, completed=R, failed=R, cancel="failed"),
    "cancelled": dict(needs_input=R, input_received=R, completed=R, failed=R, cancel="cancelled"),
}

PAIRS = [(status, event) for status in STATUSES for event in EVENTS]


def test_the_statuses_and_events_are_the_seps() -> None:
    assert set(STATUSES) == {"working", "input_required", "completed", "failed", "cancelled"}
    assert set(EVENTS) == {"needs_input", "input_received", "completed", "failed", "cancel"}
    assert {"completed", "failed", "cancelled"} == TERMINAL_STATUSES
    assert set(EXPECTED) == set(STATUSES)
    assert all(set(row) == set(EVENTS) for row in EXPECTED.values())


def test_the_table_holds_only_known_pairs() -> None:
    assert set(TRANSITIONS) <= set(PAIRS)
    assert set(TRANSITIONS.values()) <= set(STATUSES)


@pytest.mark.parametrize(("status", "event"), PAIRS)
def test_every_pair(status: Any, event: Any) -> None:
    expected = EXPECTED[status][event]
    if expected is None:
        assert (status, event) not in TRANSITIONS
        with pytest.raises(LocalProtocolError) as caught:
            next_status(status, event)
        if status in TERMINAL_STATUSES:
            assert "terminal" in caught.value.message
    else:
        assert next_status(status, event) == expected
        assert TRANSITIONS[(status, event)] == expected


@pytest.mark.parametrize("status", sorted(TERMINAL_STATUSES))
def test_a_terminal_task_stays_terminal(status: Any) -> None:
    for event in EVENTS:
        try:
            assert next_status(status, event) == status
        except LocalProtocolError:
            assert event != "cancel"


@pytest.mark.parametrize(
    ("status", "event"), [("done", "cancel"), ("working", "finish"), (1, "cancel")]
)
def test_unknown_statuses_and_events_are_refused(status: Any, event: Any) -> None:
    with pytest.raises(LocalProtocolError, match="unknown task status or event"):
        next_status(status, event)


def test_a_walk_through_the_seps_flow() -> None:
    status = next_status("working", "needs_input")
    status = next_status(status, "input_received")
    status = next_status(status, "completed")
    assert status == "completed"
    assert next_status(status, "cancel") == "completed"  # acknowledged, nothing changes
