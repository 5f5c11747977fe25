"""The task target: a peer's SEP-2663 shapes through the core's strict readers.

Control byte: which reader (``CreateTaskResult.from_result``,
``DetailedTask.from_result``, ``DetailedTask.from_notification_params``, or
``TaskRequest.from_params`` for each task method), or, past them, a walk of the
status machine.  The rest is one JSON value, what a peer sends.  A reader lets
out only its documented errors; what it reads, written back, reads again to the
same value (what we write, a peer like us reads); the status machine never
leaves a terminal status.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import mrtr_core as m
from mrtr_core.tasks._status import EVENTS

from ._common import STDLIB, guarded

Reader = Callable[[Any], Any]
Writer = Callable[[Any], Any]


def _request(method: str) -> tuple[Reader, Writer]:
    def read(value: Any) -> Any:
        return m.tasks.TaskRequest.from_params(method, value)

    return read, lambda request: request.to_params()


READERS: tuple[tuple[Reader, Writer], ...] = (
    (m.tasks.CreateTaskResult.from_result, lambda task: task.to_result()),
    (m.tasks.DetailedTask.from_result, lambda task: task.to_result()),
    (
        m.tasks.DetailedTask.from_notification_params,
        lambda task: task.to_notification_params(),
    ),
    _request("tasks/get"),
    _request("tasks/update"),
    _request("tasks/cancel"),
)


def _walk(events: bytes) -> None:
    """The status machine over ``events``: refusals are ``LocalProtocolError``s, and a
    terminal status is never left."""
    status: m.tasks.TaskStatus = "working"
    for byte in events[:64]:
        event = EVENTS[byte % len(EVENTS)]
        moved = guarded(functools.partial(m.tasks.next_status, status, event))
        if moved is None:
            continue
        if status in m.tasks.TERMINAL_STATUSES:
            assert moved == status, (status, event, moved)
        status = moved


def tasks(data: bytes) -> None:
    if len(data) < 2:
        return
    choice = data[0] % (len(READERS) + 1)
    if choice == len(READERS):
        _walk(data[1:])
        return
    value = guarded(lambda: STDLIB.loads(data[1:]))
    if value is None:
        return
    read, write = READERS[choice]
    parsed = guarded(lambda: read(value))
    if parsed is None:
        return
    written = write(parsed)
    assert read(STDLIB.loads(STDLIB.dumps(written))) == parsed, (value, written)
