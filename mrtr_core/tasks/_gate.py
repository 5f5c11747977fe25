"""Who may use tasks: the extension's per-request capability, and the errors of the
task methods.

Capabilities are per request in 2026-07-28: a request declares the extension in
its own ``_meta`` client capabilities (``extensions: {"io.modelcontextprotocol/tasks":
{}}``), and a server never infers it from an earlier one.  Without it, a server
must not answer with a task, and refuses the task methods, a tool it can only run
as a task, and task notifications on ``subscriptions/listen`` with -32021 naming the
extension.  A task id the server does not know is -32602.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._errors import INVALID_PARAMS, RemoteProtocolError, clip, describe
from ..server._asking import CapabilityRequired

#: The extension's identifier, under ``extensions`` in client and server capabilities.
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"


def declares_tasks(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a request's client capabilities declare the tasks extension (an object,
    ``{}`` being support with no settings)."""
    if not isinstance(capabilities, Mapping):
        return False
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def with_tasks(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a client's ``capabilities`` that declares the tasks extension too (its
    other extensions kept; ``capabilities`` is not changed)."""
    out = dict(capabilities)
    extensions = out.get("extensions")
    out["extensions"] = {
        **(extensions if isinstance(extensions, Mapping) else {}),
        TASKS_EXTENSION: {},
    }
    return out


def require_tasks(capabilities: Mapping[str, Any] | None, what: str) -> None:
    """Raise ``CapabilityRequired`` (-32021, ``data.requiredCapabilities.extensions``
    naming the tasks extension) unless ``capabilities`` declare it.

    ``what`` says what needed it, in the message: ``"tasks/get"``, ``"tool 'deploy'"``.
    """
    if not declares_tasks(capabilities):
        # (a fresh fragment each time: the error's data is its own to change)
        raise CapabilityRequired(
            {"extensions": {TASKS_EXTENSION: {}}},
            f"Missing required client capability: {what} needs the {TASKS_EXTENSION} extension",
        )


class UnknownTask(RemoteProtocolError):
    """-32602: no task of this id (never created, expired and purged, or not the
    caller's to see: a server does not tell these apart).  ``data = {"taskId": ...}``."""

    def __init__(self, task_id: Any, *, request_id: str | int | None = None) -> None:
        super().__init__(
            f"Failed to retrieve task: Task not found ({describe(task_id)})",
            code=INVALID_PARAMS,
            data={"taskId": clip(task_id)},
            request_id=request_id,
        )
        self.task_id = task_id
