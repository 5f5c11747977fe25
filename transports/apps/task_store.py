"""The task store: where an app's tasks (SEP-2663) live, and what bounds them.

A tool registered with ``task="optional"`` or ``task="required"`` may hand its work
to a task (``return ctx.run_task(work, ...)``, ``task_runs``); the store keeps each
task's record (status, timestamps, outstanding input requests and the answers that
came for them, the result or the error) from its creation until its TTL, and is
what ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` read and write
(``task_methods``).  Statuses move only through the core's table
(``mrtr_core.tasks.next_status``), here, in :meth:`MemoryTaskStore.change`.

:class:`TaskStore` is the interface (``mrtr_transports.stores.redis_tasks.RedisTaskStore``,
shared by several workers, implements the same); :class:`MemoryTaskStore` is the one of a single
process.  The app owns one: ``McpApp(..., tasks=MemoryTaskStore(...))``, or one
with the default bounds, made when the first task tool is registered.

Trust: a task id is ``secrets.token_urlsafe`` of :data:`TASK_ID_BYTES` bytes (192
bits), and a task is bound to the principal whose request created it: any other
principal's ``tasks/get``, ``update``, ``cancel`` or listen finds it exactly as it
finds an id that never existed (``UnknownTask``, -32602).

Bounds (``MemoryTaskStore(...)`` keywords; ``docs/reliability.md``):

* ``max_tasks`` records at once (default 1000), at most ``max_tasks_per_client`` of
  them created by one client (default 100; ``Context.client``): a ``tools/call`` that
  would create one more is refused with :class:`TooManyTasks` (-32000 naming the
  bound, ``data.reason`` ``own_share`` or ``pool_full``).  A record counts until it
  is removed (at its TTL), finished or not: it is what the memory holds.
* ``max_pending_inputs`` outstanding input requests per task (default 16): a work
  that asks more at once fails on a ``LocalProtocolError``.
* ``max_result_bytes`` of encoded result (default 1 MiB): a larger one fails the
  task with -32603 "result too large".
* ``ttl`` seconds from creation (default 3600; ``ttlMs`` on the wire): then a
  finished task's record is removed; a task still running is cancelled and marked
  ``failed`` (-32603, "expired"), and its record is removed :data:`EXPIRED_GRACE`
  seconds later, so a client polling at its interval sees why.
* ``poll_interval`` seconds (default 1; ``pollIntervalMs``): what clients are told.

``id_prefix`` (default none): what every task id starts with, e.g. ``"w1."``, so a
load balancer can route the task methods to the worker that holds the task by the
``Mcp-Name`` header (``mrtr serve --task-id-prefix w1``; ``docs/deploying.md``).

Time: every method takes ``now``, the app's clock (``McpApp(clock=...)``, the wall
clock by default: timestamps and TTLs mean the same to every worker); the store
itself reads no clock.  Expired records are removed as the store is used.
"""

from __future__ import annotations

import heapq
import json
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import anyio
import attrs

import mrtr_core as m
from mrtr_core.tasks import CreateTaskResult, DetailedTask, TaskEvent, TaskStatus, UnknownTask

from .._shares import ClientShares

#: The store's bounds, by default.
DEFAULT_MAX_TASKS = 1000
DEFAULT_MAX_TASKS_PER_CLIENT = 100
DEFAULT_MAX_PENDING_INPUTS = 16
DEFAULT_MAX_RESULT_BYTES = 1024 * 1024
DEFAULT_TTL = 3600.0
DEFAULT_POLL_INTERVAL = 1.0
#: How long the record of a task failed at its TTL is kept (seconds), for its client to see.
EXPIRED_GRACE = 60.0
#: Random bytes in a task id (192 bits; ``secrets.token_urlsafe``: 32 characters).
TASK_ID_BYTES = 24
#: What a task id's routing prefix may hold (it travels in the ``Mcp-Name`` header, and a
#: load balancer matches it: ``docs/deploying.md``).
_ID_PREFIX = re.compile(r"[A-Za-z0-9._-]{0,64}")


def check_id_prefix(id_prefix: str) -> str:
    """``id_prefix`` if a task id may start with it (``ValueError`` otherwise)."""
    if not isinstance(id_prefix, str) or not _ID_PREFIX.fullmatch(id_prefix):
        raise ValueError(f"a task id prefix is up to 64 of A-Z a-z 0-9 . _ -: {id_prefix!r}")
    return id_prefix


def new_task_id(id_prefix: str = "") -> str:
    """A new unguessable task id, after ``id_prefix`` (a routing prefix naming the worker)."""
    return id_prefix + secrets.token_urlsafe(TASK_ID_BYTES)


class TooManyTasks(m.MrtrError):
    """-32000: the client's share (``max_tasks_per_client``) or the store's bound
    (``max_tasks``) of tasks is held: the ``tools/call`` that would create one more."""

    code = m.ErrorCode.SERVER_BUSY


@attrs.define(eq=False)
class TaskRecord:
    """One task, as the store holds it."""

    task_id: str
    #: Whose task it is (``None``: an app without one; any caller with the id).
    principal: str | None
    #: Whose share it counts against (``Context.client``).
    client: str
    created_at: float
    updated_at: float
    #: Seconds from ``created_at`` until the record is removed.
    ttl: float
    poll_interval: float
    status: TaskStatus = "working"
    message: str | None = None
    #: The outstanding input requests, by key (``inputRequests`` while input_required).
    pending: dict[str, m.wire.InputRequest] = attrs.Factory(dict)
    #: Answers received for keys still awaited by the work (raw, already validated).
    answered: dict[str, Any] = attrs.Factory(dict)
    #: Every key ever asked: keys are unique over a task's lifetime.
    used_keys: set[str] = attrs.Factory(set)
    result: dict[str, Any] | None = None
    error: m.ErrorObject | None = None
    cancel_requested: bool = False
    #: Set (and replaced) whenever answers arrive or a cancel is asked: the work wakes.
    changed: anyio.Event = attrs.Factory(anyio.Event)
    #: The running work's cancellation (``None`` once it ended, or for a store elsewhere).
    cancel_work: Callable[[], None] | None = None
    #: When the record is removed (its TTL; a grace later for one failed at its TTL).
    keep_until: float = 0.0

    @property
    def expires_at(self) -> float:
        return self.created_at + self.ttl

    @property
    def terminal(self) -> bool:
        return self.status in m.tasks.TERMINAL_STATUSES

    def _ms(self, seconds: float) -> int:
        return max(1, round(seconds * 1000))

    def created(self) -> CreateTaskResult:
        """The ``tools/call`` answer that hands this task to the client."""
        return CreateTaskResult(**self._task_fields())

    def detailed(self) -> DetailedTask:
        """The task as ``tasks/get`` answers it and ``notifications/tasks`` pushes it: the
        fields of :meth:`created`, and what its status carries."""
        return DetailedTask(
            **self._task_fields(),
            input_requests=dict(self.pending) if self.status == "input_required" else None,
            result=self.result if self.status == "completed" else None,
            error=self.error if self.status == "failed" else None,
        )

    def _task_fields(self) -> dict[str, Any]:
        """The task's own fields, as every shape of it on the wire carries them."""
        return {
            "task_id": self.task_id,
            "status": self.status,
            "created_at": self.created_at,
            "last_updated_at": self.updated_at,
            "ttl_ms": self._ms(self.ttl),
            "poll_interval_ms": self._ms(self.poll_interval),
            "status_message": self.message,
        }

    def _wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


#: Told of every status change (``McpApp`` forwards them to listen streams).
Watcher = Callable[[TaskRecord], None]


class TaskStore(Protocol):
    """What the app's tasks need from a store.  The method side (``tasks/*``) calls
    :meth:`find`, :meth:`answer` and :meth:`cancel`; the running work calls the
    others.  ``principal`` is the caller's: a record of another reads as unknown."""

    ttl: float
    poll_interval: float
    max_pending_inputs: int
    max_result_bytes: int

    async def create(self, *, principal: str | None, client: str, now: float) -> TaskRecord:
        """A new ``working`` task, findable before this returns (the SEP's durable
        create); :class:`TooManyTasks` past a bound."""
        ...

    async def find(self, task_id: Any, principal: str | None, now: float) -> TaskRecord:
        """The caller's task of this id, or ``UnknownTask`` (-32602)."""
        ...

    async def change(
        self,
        task_id: str,
        event: TaskEvent,
        now: float,
        *,
        result: dict[str, Any] | None = None,
        error: m.ErrorObject | None = None,
    ) -> TaskRecord | None:
        """Move the task by ``event`` (the core's table); ``None`` if it is gone."""
        ...

    async def set_message(self, task_id: str, message: str, now: float) -> None: ...

    async def ask(
        self, task_id: str, requests: Mapping[str, m.wire.InputRequest], now: float
    ) -> None:
        """Make ``requests`` outstanding (status ``input_required``)."""
        ...

    async def wait_answers(self, task_id: str, keys: frozenset[str]) -> dict[str, Any]:
        """Wait until every key of ``keys`` is answered; take and return the answers."""
        ...

    async def answer(
        self, task_id: str, principal: str | None, answers: Mapping[str, Any], now: float
    ) -> None:
        """Deliver validated answers to outstanding keys (others are ignored)."""
        ...

    async def cancel(self, task_id: Any, principal: str | None, now: float) -> None:
        """Ask a running task to stop (a finished one is left as it is)."""
        ...

    async def expire(self, task_id: str, now: float) -> None:
        """The work ran out its TTL (by the loop's clock): fail the task as the store's
        own expiry does (the app's clock may not have got there yet)."""
        ...

    def attach(self, task_id: str, cancel_work: Callable[[], None] | None) -> bool:
        """Hold the running work's cancellation (what :meth:`cancel` and an expiry
        call), or drop it (``None``) when the work ends.  ``False``: the task is gone
        or already settled (cancelled before its work started): run nothing."""
        ...

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher`` on every status change; returns what stops it."""
        ...


class MemoryTaskStore:
    """The tasks of one process, in memory, bounded as the module says."""

    def __init__(
        self,
        *,
        max_tasks: int = DEFAULT_MAX_TASKS,
        max_tasks_per_client: int = DEFAULT_MAX_TASKS_PER_CLIENT,
        max_pending_inputs: int = DEFAULT_MAX_PENDING_INPUTS,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        ttl: float = DEFAULT_TTL,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        id_prefix: str = "",
    ) -> None:
        if max_pending_inputs < 1 or max_result_bytes < 1:
            raise ValueError("max_pending_inputs and max_result_bytes must be positive")
        if not (ttl > 0 and poll_interval > 0):
            raise ValueError("ttl and poll_interval must be positive")
        self.shares = ClientShares(
            max_tasks,
            max_tasks_per_client,
            what="tasks",
            total_setting="max_tasks",
            per_client_setting="max_tasks_per_client",
        )
        self.max_pending_inputs = max_pending_inputs
        self.max_result_bytes = max_result_bytes
        self.ttl = ttl
        self.poll_interval = poll_interval
        #: What every task id starts with (``mrtr serve --task-id-prefix``: routing).
        self.id_prefix = check_id_prefix(id_prefix)
        self._records: dict[str, TaskRecord] = {}
        #: (when to look again, task id): the next expiry first.
        self._expiries: list[tuple[float, str]] = []
        self._watchers: list[Watcher] = []

    def __len__(self) -> int:
        return len(self._records)

    # --- the method side ------------------------------------------------------------------

    async def create(self, *, principal: str | None, client: str, now: float) -> TaskRecord:
        self._expire(now)
        refused = self.shares.admit(client)
        if refused is not None:
            raise refused.error(TooManyTasks)
        task_id = new_task_id(self.id_prefix)
        record = TaskRecord(
            task_id=task_id,
            principal=principal,
            client=client,
            created_at=now,
            updated_at=now,
            ttl=self.ttl,
            poll_interval=self.poll_interval,
        )
        record.keep_until = record.expires_at
        self._records[task_id] = record
        heapq.heappush(self._expiries, (record.expires_at, task_id))
        return record

    async def find(self, task_id: Any, principal: str | None, now: float) -> TaskRecord:
        self._expire(now)
        record = self._records.get(task_id) if isinstance(task_id, str) else None
        # Another principal's task is not told apart from one that never existed.
        if record is None or record.principal != principal:
            raise UnknownTask(task_id)
        return record

    async def answer(
        self, task_id: str, principal: str | None, answers: Mapping[str, Any], now: float
    ) -> None:
        record = await self.find(task_id, principal, now)
        taken = [key for key in answers if key in record.pending]
        if not taken:
            return  # nothing outstanding answered: ignored, as the SEP says
        for key in taken:
            del record.pending[key]
            record.answered[key] = answers[key]
        record.updated_at = now
        if not record.pending:
            self._move(record, "input_received", now)
        record._wake()

    async def cancel(self, task_id: Any, principal: str | None, now: float) -> None:
        record = await self.find(task_id, principal, now)
        if record.terminal or record.cancel_requested:
            return  # the same empty ack; nothing changes
        record.cancel_requested = True
        if record.cancel_work is not None:
            record.cancel_work()  # the run settles it to cancelled
        else:  # no work runs it any more (it never started): settle it here
            self._move(record, "cancel", now)
        record._wake()

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher)

    # --- the work side --------------------------------------------------------------------

    async def change(
        self,
        task_id: str,
        event: TaskEvent,
        now: float,
        *,
        result: dict[str, Any] | None = None,
        error: m.ErrorObject | None = None,
    ) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is None:
            return None
        if record.terminal:
            return record  # (a task failed at its TTL while its work was ending)
        if event == "completed" and result is not None:
            size = len(json.dumps(result, separators=(",", ":")).encode())
            if size > self.max_result_bytes:
                event, result = "failed", None
                error = m.ErrorObject(
                    code=m.ErrorCode.INTERNAL_ERROR,
                    message=f"result too large: {size} bytes (max_result_bytes="
                    f"{self.max_result_bytes})",
                )
        record.result = result
        record.error = error
        self._move(record, event, now)
        return record

    async def set_message(self, task_id: str, message: str, now: float) -> None:
        record = self._records.get(task_id)
        if record is not None and not record.terminal:
            record.message = message
            record.updated_at = now

    async def ask(
        self, task_id: str, requests: Mapping[str, m.wire.InputRequest], now: float
    ) -> None:
        record = self._records.get(task_id)
        if record is None:
            raise m.LocalProtocolError("the task is gone (past its TTL)")
        reused = sorted(key for key in requests if key in record.used_keys)
        if reused:
            raise m.LocalProtocolError(
                f"input keys are unique over a task's lifetime: {reused} were asked before"
            )
        if len(record.pending) + len(requests) > self.max_pending_inputs:
            raise m.LocalProtocolError(
                f"a task has at most max_pending_inputs={self.max_pending_inputs} "
                "outstanding input requests"
            )
        record.used_keys.update(requests)
        record.pending.update(requests)
        self._move(record, "needs_input", now)

    async def wait_answers(self, task_id: str, keys: frozenset[str]) -> dict[str, Any]:
        while True:
            record = self._records.get(task_id)
            if record is None:
                raise m.LocalProtocolError("the task is gone (past its TTL)")
            if keys <= record.answered.keys():
                return {key: record.answered.pop(key) for key in keys}
            await record.changed.wait()

    async def expire(self, task_id: str, now: float) -> None:
        record = self._records.get(task_id)
        if record is not None and not record.terminal:
            self._fail_expired(record, now)

    def attach(self, task_id: str, cancel_work: Callable[[], None] | None) -> bool:
        """Hold (or, with ``None``, drop) the running work's cancellation."""
        record = self._records.get(task_id)
        if record is None or record.terminal:
            return False
        record.cancel_work = cancel_work
        return True

    # --- inside ---------------------------------------------------------------------------

    def _move(self, record: TaskRecord, event: TaskEvent, now: float) -> None:
        before = record.status
        record.status = m.tasks.next_status(before, event)
        record.updated_at = now
        if record.terminal:
            record.pending.clear()
            record.answered.clear()
            if record.status != before:
                # What the work said while it ran ("waiting for your answer") is not
                # what a finished task is: a terminal status carries no stale message.
                record.message = None
        if record.status != before or event == "needs_input":
            for watcher in list(self._watchers):
                watcher(record)

    def _expire(self, now: float) -> None:
        """Remove what is past its TTL; fail what still runs then."""
        while self._expiries and self._expiries[0][0] <= now:
            _, task_id = heapq.heappop(self._expiries)
            record = self._records.get(task_id)
            if record is None or record.keep_until > now:
                continue  # gone already, or kept longer (a later entry stands for it)
            if record.terminal:
                del self._records[task_id]
                self.shares.release(record.client)
                continue
            self._fail_expired(record, now)

    def _fail_expired(self, record: TaskRecord, now: float) -> None:
        """A task still running at its TTL: stop the work, say why, and keep the record
        :data:`EXPIRED_GRACE` seconds longer, for its client to see."""
        cancel, record.cancel_work = record.cancel_work, None
        if cancel is not None:
            cancel()
        record.error = m.ErrorObject(
            code=m.ErrorCode.INTERNAL_ERROR, message="expired: the task outlived its ttlMs"
        )
        self._move(record, "failed", now)
        record._wake()
        record.keep_until = now + EXPIRED_GRACE
        heapq.heappush(self._expiries, (record.keep_until, record.task_id))


__all__ = [
    "DEFAULT_MAX_PENDING_INPUTS",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MAX_TASKS",
    "DEFAULT_MAX_TASKS_PER_CLIENT",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_TTL",
    "EXPIRED_GRACE",
    "TASK_ID_BYTES",
    "MemoryTaskStore",
    "TaskRecord",
    "TaskStore",
    "TooManyTasks",
    "Watcher",
    "check_id_prefix",
    "new_task_id",
]
