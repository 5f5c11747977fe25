"""The task status machine of SEP-2663, as one transition table.

A task is ``working`` or ``input_required`` until it reaches one of the three
terminal statuses, and then it stays there.  What moves it is an *event* the
server's own code reports (the work asked for input, the input came, the work
ended, the cancellation took effect).  Every (status, event) pair is decided in
:data:`TRANSITIONS`: a pair that is not there is a misuse, a second outcome for
a task that already has one.  A cancel of a terminal task is the exception the
SEP names: it is acknowledged and changes nothing (``tasks/cancel`` on a
finished task answers the same empty ack as on a running one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, get_args

from .._errors import LocalProtocolError, describe

#: The statuses a task reports (``status`` on the wire).
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
#: What happens to a task: the work needs input, the input it waited for came, the work
#: completed (with a result, an ``isError`` tool result included) or failed (with a
#: JSON-RPC error), the cancellation took effect.
TaskEvent = Literal["needs_input", "input_received", "completed", "failed", "cancel"]

STATUSES: Final[tuple[TaskStatus, ...]] = get_args(TaskStatus)
EVENTS: Final[tuple[TaskEvent, ...]] = get_args(TaskEvent)

#: Statuses a task never leaves: a client stops polling there.
TERMINAL_STATUSES: Final[frozenset[TaskStatus]] = frozenset({"completed", "failed", "cancelled"})

#: (status, event) -> the next status.  A pair that is absent is refused.
TRANSITIONS: Final[Mapping[tuple[TaskStatus, TaskEvent], TaskStatus]] = {
    ("working", "needs_input"): "input_required",
    ("working", "completed"): "completed",
    ("working", "failed"): "failed",
    ("working", "cancel"): "cancelled",
    # more input asked while some is outstanding: still waiting
    ("input_required", "needs_input"): "input_required",
    ("input_required", "input_received"): "working",
    ("input_required", "completed"): "completed",
    ("input_required", "failed"): "failed",
    ("input_required", "cancel"): "cancelled",
    # terminal: a cancel is acknowledged and changes nothing
    ("completed", "cancel"): "completed",
    ("failed", "cancel"): "failed",
    ("cancelled", "cancel"): "cancelled",
}


def next_status(status: TaskStatus, event: TaskEvent) -> TaskStatus:
    """The status a task in ``status`` moves to on ``event``.

    Raises ``LocalProtocolError`` for a pair the machine refuses: an outcome for a
    task that already has one, input received while none was asked, an unknown
    status or event.
    """
    found = TRANSITIONS.get((status, event))
    if found is None:
        if status not in STATUSES or event not in EVENTS:
            raise LocalProtocolError(
                f"unknown task status or event: {describe(status)}, {describe(event)}"
            )
        if status in TERMINAL_STATUSES:
            raise LocalProtocolError(f"a {status} task is terminal: {event!r} cannot change it")
        raise LocalProtocolError(f"a {status} task has no {event!r} event")
    return found
