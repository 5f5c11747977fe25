"""What the server says while a call runs, one line each on stderr: progress and log messages.

The model: a call's result is the only thing on stdout; while it runs the
server may send ``notifications/progress`` (for the call's progress token,
which the command asks for) and ``notifications/message`` (log messages, at
or above the ``logLevel`` the command asks for, ``info`` unless
``--log-level``).  Each becomes one line on stderr, as it arrives::

    progress 50/100 (50%): halfway there
    log warning [deploy]: the disk is nearly full
    task 786512e2: input_required: waiting for a name

A call that became a task (SEP-2663) shows each change of the task's status and
``statusMessage`` as it is polled (``task ID: STATUS[: MESSAGE]``).

Everything shown comes from the peer, so it is made safe for a terminal first
(:func:`~mrtr_transports.cli.terminal_text.one_line`, the one rule): newlines
become spaces, control characters (escape sequences, carriage returns, C1) and
bidi controls are shown escaped (``\\x1b``), and a line is cut at
:data:`MAX_NOTICE` characters.
``--quiet`` asks for neither (no progress token, no ``logLevel``), so the
server has nothing to send.
"""

from __future__ import annotations

import logging
import math
from typing import Any, TextIO

import mrtr_core as m
from mrtr_core._meta import LOG_LEVELS

from . import json_text
from .terminal_text import MAX_LINE, one_line

__all__ = ["MAX_NOTICE", "Notices", "one_line"]

#: The longest line a notice prints (the rest is cut, marked with an ellipsis).
MAX_NOTICE = MAX_LINE
#: The client logs each server log message too (``mrtr.client``): the lines here replace that.
_CLIENT_LOGGER = "mrtr.client"


def _number(value: float) -> str:
    return f"{value:g}" if math.isfinite(value) else str(value)


def describe_progress(event: m.Progress) -> str:
    """``progress 50/100 (50%): message`` (the parts the server gave)."""
    text = f"progress {_number(event.progress)}"
    if event.total is not None:
        text += f"/{_number(event.total)}"
        if event.total > 0 and math.isfinite(event.progress):
            text += f" ({100 * event.progress / event.total:.0f}%)"
    if event.message:
        text += f": {event.message}"
    return one_line(text)


def describe_log(params: Any) -> str:
    """``log LEVEL [LOGGER]: DATA`` of a ``notifications/message``'s params."""
    params = params if isinstance(params, dict) else {}
    level = params.get("level")
    text = f"log {level if isinstance(level, str) else '?'}"
    name = params.get("logger")
    if isinstance(name, str) and name:
        text += f" [{name}]"
    data = params.get("data")
    shown = data if isinstance(data, str) else json_text.dumps(data, indent=None, default=str)
    return one_line(f"{text}: {shown}")


def describe_task_status(task_id: str, change: m.tasks.TaskStatusChanged) -> str:
    """``task ID: STATUS[: MESSAGE]`` for a change of a task's status."""
    text = f"task {task_id}: {change.status}"
    if change.status_message:
        text += f": {change.status_message}"
    return one_line(text)


class Notices:
    """Writes the lines to ``out`` (stderr); ``on_progress`` and ``on_notification`` are
    the client's callbacks.  Log messages below ``log_level`` are not shown: a 2025
    server sends every level (its app owns ``logging/setLevel``), so the command keeps
    the promise of ``--log-level`` itself."""

    def __init__(self, out: TextIO, log_level: str | None = None) -> None:
        self.out = out
        self.threshold = LOG_LEVELS.index(log_level) if log_level in LOG_LEVELS else 0
        # The lines here say it already; the client's own log record would say it twice.
        logging.getLogger(_CLIENT_LOGGER).addFilter(_drop_server_logs)

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def on_progress(self, event: m.Progress) -> None:
        self._write(describe_progress(event))

    def on_task_status(self, task_id: str, change: m.tasks.TaskStatusChanged) -> None:
        self._write(describe_task_status(task_id, change))

    def on_notification(self, note: m.Notification) -> None:
        if note.method != "notifications/message":
            return
        level = (note.params or {}).get("level")
        if level in LOG_LEVELS and LOG_LEVELS.index(level) < self.threshold:
            return
        self._write(describe_log(note.params))


def _drop_server_logs(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("server log [")
