"""Tasks (SEP-2663, the ``io.modelcontextprotocol/tasks`` extension), for server and
client authors: the wire shapes, the status machine, the capability gate.

A server that negotiated the extension may answer a ``tools/call`` with a
:class:`CreateTaskResult` (``resultType: "task"``) instead of its result; the
client then polls ``tasks/get`` for a :class:`DetailedTask`, answers its
``inputRequests`` with ``tasks/update`` and may ``tasks/cancel`` it
(:class:`TaskRequest` is the params of all three).  A task's status moves by
:func:`next_status` until it is one of :data:`TERMINAL_STATUSES`.  Only a request
whose own ``_meta`` capabilities declare :data:`TASKS_EXTENSION`
(:func:`declares_tasks`) may get a task or use the task methods
(:func:`require_tasks`); an unknown task id is :class:`UnknownTask`.
A client drives a task with a :class:`TaskPoller` (time in, events out, like the
round engine: :class:`SendTaskRequest`, :class:`TaskStatusChanged` and the round
engine's input and terminal events).

Sans-IO like the rest of the core: no store, no clock (times are passed in as
floats), no I/O.  See ``docs/core.md`` (its section on the task model).
"""

from ._gate import TASKS_EXTENSION, UnknownTask, declares_tasks, require_tasks
from ._poll import SendTaskRequest, TaskPoller, TaskStatusChanged
from ._status import TERMINAL_STATUSES, TaskEvent, TaskStatus, next_status
from ._wire import CreateTaskResult, DetailedTask, TaskRequest

__all__ = [
    # who may use tasks
    "TASKS_EXTENSION",
    "declares_tasks",
    "require_tasks",
    "UnknownTask",
    # the status machine
    "TaskStatus",
    "TaskEvent",
    "TERMINAL_STATUSES",
    "next_status",
    # the wire shapes
    "CreateTaskResult",
    "DetailedTask",
    "TaskRequest",
    # the client's polling engine
    "TaskPoller",
    "SendTaskRequest",
    "TaskStatusChanged",
]
