"""The task methods (SEP-2663) an app serves: ``tasks/get``, ``tasks/update``,
``tasks/cancel``, and which task ids a ``subscriptions/listen`` may watch.

Each is gated first (``mrtr_core.tasks.require_tasks``: -32021 naming the extension
to a request that did not declare it, whatever its params), then read
(``TaskRequest.from_params``: -32602 for a malformed one), then looked up in the
app's store for the caller's principal: an unknown id, an expired one and one of
another principal are the same -32602 (``UnknownTask``).

* ``tasks/get``: the task as it stands (``DetailedTask``, ``resultType: "complete"``).
* ``tasks/update``: the answers to outstanding input requests, each validated as an
  MRTR answer is (``mrtr_core.server.Answers``: a form answer against the schema it
  was asked with, the others by their shape; one invalid answer refuses the whole
  update with -32602 and nothing is applied); answers to keys that are not
  outstanding are ignored, as the SEP says; an empty ack.
* ``tasks/cancel``: asks the work to stop (it settles to ``cancelled``); a finished
  task is left as it is; the same empty ack either way.

``tasks/result`` and ``tasks/list`` (the 2025 experimental surface) are not served:
-32601, as any unknown method.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import mrtr_core as m

from .task_store import TaskStore

#: The methods served here.
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: Most task ids one ``subscriptions/listen`` filter may name.
MAX_LISTENED_TASKS = 100


async def serve_task_method(
    store: TaskStore,
    request: m.Request,
    info: m.server.RequestInfo,
    principal: str | None,
    now: float,
) -> dict[str, Any]:
    """Serve one request of :data:`TASK_METHODS` for ``principal``."""
    method = request.method
    m.tasks.require_tasks(info.capabilities, method)  # gate before lookup
    asked = m.tasks.TaskRequest.from_params(method, request.params or {})
    if method == "tasks/get":
        record = await store.find(asked.task_id, principal, now)
        return record.detailed().to_result()
    if method == "tasks/cancel":
        await store.cancel(asked.task_id, principal, now)
        return {}
    record = await store.find(asked.task_id, principal, now)
    answers: dict[str, Any] = {}
    for key, raw in (asked.input_responses or {}).items():
        outstanding = record.pending.get(key)
        if outstanding is None:
            continue  # never asked, already answered, or superseded: ignored
        kind = m.wire.INPUT_KINDS.kind_for(outstanding).name
        one = m.server.Answers({"inputResponses": {key: raw}}, proven={key: kind})
        one.get(key, outstanding)  # InvalidAnswer (-32602) when it is not an answer to it
        answers[key] = raw
    await store.answer(asked.task_id, principal, answers, now)
    return {}


async def listened_tasks(
    store: TaskStore | None,
    task_ids: Any,
    capabilities: Any,
    principal: str | None,
    now: float,
) -> list[str]:
    """The ids of a listen filter's ``taskIds`` that ``principal`` may watch (the others
    are left out of the acknowledgement, as unknown); -32021 when the request did
    not declare the extension, -32602 for a filter that is not a short list of ids."""
    m.tasks.require_tasks(capabilities, "subscriptions/listen with taskIds")
    if not _id_list(task_ids):
        raise m.MrtrError("taskIds must be a list of task ids", code=m.ErrorCode.INVALID_PARAMS)
    if len(task_ids) > MAX_LISTENED_TASKS:
        raise m.MrtrError(f"at most {MAX_LISTENED_TASKS} taskIds", code=m.ErrorCode.INVALID_PARAMS)
    visible: list[str] = []
    if store is None:
        return visible
    for task_id in dict.fromkeys(task_ids):
        try:
            await store.find(task_id, principal, now)
        except m.tasks.UnknownTask:
            continue
        visible.append(task_id)
    return visible


def _id_list(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and all(isinstance(item, str) for item in value)
    )


__all__ = ["MAX_LISTENED_TASKS", "TASK_METHODS", "listened_tasks", "serve_task_method"]
