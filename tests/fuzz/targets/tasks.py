"""The task target: a peer's SEP-2663 shapes through the core's strict readers.

Control byte: which reader (``CreateTaskResult.from_result``,
``DetailedTask.from_result``, ``DetailedTask.from_notification_params``, or
``TaskRequest.from_params`` for each task method), or, past them, a walk of the
status machine, or a client's ``TaskPoller`` fed a server's polls.  For a reader
the rest is one JSON value, what a peer sends.  A reader lets out only its
documented errors; what it reads, written back, reads again to the same value
(what we write, a peer like us reads); the status machine never leaves a
terminal status.

The poller: the rest is lines, each a ``tasks/get`` result (or, with a ``code``,
a JSON-RPC error) the server sends, after a byte saying what the app does first
(answer every ask handed out, fail one, let the time run out, cancel).  Only
documented errors come out; each ask is handed out once; at most one
``tasks/cancel``; nothing after the end.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import mrtr_core as m
from mrtr_core.tasks._status import EVENTS

from ._common import ALL_CAPS, STDLIB, guarded

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


CREATED = m.tasks.CreateTaskResult(
    task_id="t1",
    status="working",
    created_at=0.0,
    last_updated_at=0.0,
    ttl_ms=60_000,
    poll_interval_ms=1000,
)
ENDS = (m.engine.Done, m.engine.Failed, m.engine.TimedOut, m.engine.Cancelled)


class _Watched:
    """What a poller handed out so far, checked as it comes."""

    def __init__(self) -> None:
        self.dispatched: set[str] = set()
        self.cancels = 0
        self.ended = False

    def drain(self, poller: m.tasks.TaskPoller) -> list[str]:
        """Every event until it waits; the keys newly handed out."""
        new: list[str] = []
        for _ in range(10_000):
            event = poller.next_event()
            if isinstance(event, m.Wait):
                return new
            assert not self.ended, f"{event!r} after the end"
            if isinstance(event, m.engine.DispatchInput):
                assert event.key not in self.dispatched, f"{event.key} handed out twice"
                self.dispatched.add(event.key)
                new.append(event.key)
            elif isinstance(event, m.tasks.SendTaskRequest):
                if event.request.method == "tasks/cancel":
                    self.cancels += 1
                    assert self.cancels == 1, "two tasks/cancel"
            elif isinstance(event, ENDS):
                self.ended = True
        raise AssertionError("next_event never waited")


def _poll(data: bytes) -> None:
    poller = m.tasks.TaskPoller(CREATED, 0.0, capabilities=ALL_CAPS, timeout=600.0)
    watched = _Watched()
    watched.drain(poller)
    now = 0.0
    for line in data.split(b"\n")[:32]:
        if not line:
            continue
        action, body = line[0], line[1:]
        now += 1.0
        new = watched.drain(poller)
        if action % 8 == 0:
            for key in new:
                response = {"action": "accept", "content": {"name": "Ada"}}
                guarded(functools.partial(poller.provide, key, response, now))
        elif action % 8 == 1 and new:
            guarded(functools.partial(poller.fail, new[0], "no answer"))
        elif action % 8 == 2:
            guarded(functools.partial(poller.timed_out, now + 600.0))
        elif action % 8 == 3:
            guarded(functools.partial(poller.cancel, now))
        value = guarded(functools.partial(STDLIB.loads, body))
        if isinstance(value, dict) and "code" in value:
            guarded(functools.partial(poller.receive_error, value, now))
        elif value is not None:
            guarded(functools.partial(poller.receive_result, value, now))
        watched.drain(poller)


def tasks(data: bytes) -> None:
    if len(data) < 2:
        return
    choice = data[0] % (len(READERS) + 2)
    if choice == len(READERS):
        _walk(data[1:])
        return
    if choice == len(READERS) + 1:
        _poll(data[1:])
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
