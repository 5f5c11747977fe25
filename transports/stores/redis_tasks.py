"""``RedisTaskStore``: the task store of several server processes, on a Redis server.

The model: a task (SEP-2663) outlives the ``tools/call`` that created it, and its
client polls, answers and cancels it with later requests (``tasks/get``,
``tasks/update``, ``tasks/cancel``) that a load balancer may send to any worker.
:class:`~mrtr_transports.apps.task_store.MemoryTaskStore` keeps tasks in one
process; this store keeps every task's record in Redis, so a task created on one
worker is read, answered and cancelled through any worker, while its work runs on
the worker that created it.

What lives where:

* the record (status, message, timestamps, ttl, poll interval, outstanding input
  requests and the answers that came for them, the result or the error, the
  principal it is bound to, the creating client, whether a cancel was asked) is
  one JSON string, ``<prefix>task:<id>``, with a Redis expiry at its TTL (a task
  still running then is kept :data:`EXPIRED_GRACE` seconds longer, so whoever reads
  it next fails it "expired", as the memory store does);
* the running worker's lease, ``<prefix>lease:<id>`` (``lease`` seconds, renewed
  every third of it while the work runs);
* the pool and each client's share: sorted sets of task ids by when their record
  goes (``<prefix>pool``, ``<prefix>client:<client key>``), the same
  ``max_tasks`` / ``max_tasks_per_client`` semantics as the memory store's
  ``ClientShares``, checked and taken in one Lua script with the record's creation.

The key names and the Lua scripts are :mod:`~mrtr_transports.stores.task_scripts`'s;
the record's JSON is :mod:`~mrtr_transports.stores.task_codec`'s; this module is the
store: the changes, the leases and the running worker's loop.

Every change is one atomic step through the memory store's own rules: read the
record, apply the change with a one-record ``MemoryTaskStore`` (its statuses move
only by ``mrtr_core.tasks.next_status``; its bounds on pending inputs and result
size, its principal check, its "expired" failure are the same code), and write it
back with a Lua compare-and-set that succeeds only if the record is still the one
read; a lost race reads again and decides again.  Two workers settling one task
therefore settle it once: the second finds it terminal.

Cross-worker, by polling: the worker running a task looks at its record every
``check_interval`` seconds (one ``MGET`` for all its running tasks): a task found
settled elsewhere (cancelled by ``tasks/cancel`` on another worker, failed by a
lapsed lease or its TTL) has its work cancelled, and a task answered elsewhere
wakes its waiting work.  Polling, not pub/sub, for these: it needs no connection
of its own, a missed message cannot lose a cancel (the record is the truth), and
its cost is one command per worker per interval.  Status notifications
(``watch``, what ``subscriptions/listen`` streams carry) do go over pub/sub
(``<prefix>events``): each worker publishes the changes it makes and tells its own
listen streams of everyone's, so a listen stream on worker B sees a task running
on worker A.  The subscription holds one connection of the pool; the messages
carry the whole record, in the order Redis received them.  A message lost while a
worker's subscription reconnects is not replayed: polling ``tasks/get`` is the
portable way.

A worker killed mid-task: its lease lapses; whichever worker next reads the task
(``tasks/get``, ``update``, ``cancel``, a listen filter) settles it ``failed`` with
-32603 "the worker running this task stopped" (:data:`WORKER_STOPPED`), atomically
with the lease's absence, so a worker that was only slow and renews in time keeps
it.  A task cancelled on another worker is ``cancelled`` at once; its work stops
at the running worker's next look (a task cancelled just after its creation may
start its work for that long: the memory store's ``attach`` refusal cannot be
asked of Redis synchronously).

Failing closed: when Redis cannot be reached, does not answer within ``timeout``
or answers with an error, the request gets :class:`TaskStoreUnavailable` (-32603,
a message naming no host; the details go to this module's logger), never a
guess; the store reconnects by itself.  The work of a task whose settling failed
keeps its last status until its lease lapses, then reads as stopped.  Once the
store is closed (the server stopping), a work not yet started is not started
(``attach`` is ``False``), what a work still ending would write is dropped (logged
at INFO), and a request gets :class:`TaskStoreUnavailable`: its tasks' leases lapse.

Time: the app's clock (``now``) dates records and decides TTLs, as in the memory
store; Redis's expiries are set relative to it (``PX``), and the lease is Redis's
own (``PX``), so a worker's clock skew cannot make another's lease look lapsed.

Use::

    store = RedisTaskStore("redis://127.0.0.1:6379/0")
    async with store:  # opens the pool, the lease/poll loop and the subscription
        app = McpApp(..., tasks=store)
        ...serve...

``mrtr serve --task-store redis://...`` does this.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import anyio.abc
import coredis
import coredis.exceptions
import coredis.retry

import mrtr_core as m
from mrtr_core.tasks import TaskEvent, UnknownTask

from .._shares import LOCAL_CLIENT, ShareRefusal
from ..apps.task_store import (
    DEFAULT_MAX_PENDING_INPUTS,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_TASKS,
    DEFAULT_MAX_TASKS_PER_CLIENT,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_TTL,
    EXPIRED_GRACE,
    MemoryTaskStore,
    TaskRecord,
    TooManyTasks,
    Watcher,
    check_id_prefix,
    new_task_id,
)
from .redis import SCHEMES, FailClosed, close_client, no_retry_client, redacted
from .task_codec import decode_task, encode_task
from .task_scripts import CREATE, RENEW, SWAP, TaskKeys

__all__ = [
    "DEFAULT_CHECK_INTERVAL",
    "DEFAULT_LEASE",
    "LOOKS_PER_LEASE",
    "DEFAULT_TASK_PREFIX",
    "WORKER_STOPPED",
    "RedisTaskStore",
    "TaskStoreUnavailable",
]

log = logging.getLogger("mrtr.stores.redis_tasks")

DEFAULT_TASK_PREFIX = "mrtr:tasks:"
#: Seconds a running worker's lease on its task lasts without renewal.
DEFAULT_LEASE = 15.0
#: Seconds between a running worker's looks at its tasks' records.
DEFAULT_CHECK_INTERVAL = 0.5
#: A lease spans at least this many looks (it is renewed at the first look past a third
#: of it: a shorter one would lapse between two looks of a live worker).
LOOKS_PER_LEASE = 3
#: The message of a task whose worker stopped (its lease lapsed while it ran).
WORKER_STOPPED = "the worker running this task stopped"
#: Compare-and-set attempts before a change gives up (only under a storm of writers).
_MAX_ATTEMPTS = 64
#: A task id longer than this was never made here.
_MAX_TASK_ID_CHARS = 128

T = TypeVar("T")


class TaskStoreUnavailable(m.MrtrError):
    """-32603: the task store could not answer; the request is refused (fail closed)."""

    code = m.ErrorCode.INTERNAL_ERROR


class RedisTaskStore:
    """A task store on a Redis server, shared by every process that uses the same URL.

    ``url``, ``prefix``, ``timeout`` and ``max_connections`` mean what they mean for
    ``RedisSingleUse``.  The bounds (``max_tasks``, ``max_tasks_per_client``,
    ``max_pending_inputs``, ``max_result_bytes``, ``ttl``, ``poll_interval``) and
    ``id_prefix`` are the memory store's, counted across every worker.  ``lease``:
    seconds a running worker's claim on its task lasts unrenewed (a killed worker's
    tasks fail that long after).  ``check_interval``: seconds between the running
    worker's looks at its tasks (how soon a cancel or an answer sent to another worker
    reaches the work).  ``origin``: this process's name in published notifications
    (random by default).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_TASK_PREFIX,
        timeout: float = 5.0,
        max_connections: int = 16,
        max_tasks: int = DEFAULT_MAX_TASKS,
        max_tasks_per_client: int = DEFAULT_MAX_TASKS_PER_CLIENT,
        max_pending_inputs: int = DEFAULT_MAX_PENDING_INPUTS,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        ttl: float = DEFAULT_TTL,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        id_prefix: str = "",
        lease: float = DEFAULT_LEASE,
        check_interval: float = DEFAULT_CHECK_INTERVAL,
    ) -> None:
        if urllib.parse.urlsplit(url).scheme not in SCHEMES:
            raise ValueError(
                f"a task store URL starts with redis://, rediss:// or unix://: {url!r}"
            )
        if not (timeout > 0 and lease > 0 and check_interval > 0) or max_connections < 1:
            raise ValueError(
                "timeout, lease and check_interval must be positive, max_connections 1 or more"
            )
        if lease < LOOKS_PER_LEASE * check_interval:
            raise ValueError(
                f"lease must be at least {LOOKS_PER_LEASE} times check_interval "
                f"({lease} < {LOOKS_PER_LEASE} * {check_interval})"
            )
        if max_tasks < 1 or max_tasks_per_client < 1:
            raise ValueError("max_tasks and max_tasks_per_client must be at least 1")
        if max_pending_inputs < 1 or max_result_bytes < 1:
            raise ValueError("max_pending_inputs and max_result_bytes must be positive")
        if not (ttl > 0 and poll_interval > 0):
            raise ValueError("ttl and poll_interval must be positive")
        self.url = url
        self.prefix = prefix
        self.timeout = float(timeout)
        self.max_tasks = max_tasks
        self.max_tasks_per_client = min(max_tasks_per_client, max_tasks)
        self.max_pending_inputs = max_pending_inputs
        self.max_result_bytes = max_result_bytes
        self.ttl = float(ttl)
        self.poll_interval = float(poll_interval)
        self.id_prefix = check_id_prefix(id_prefix)
        self.lease = float(lease)
        self.check_interval = float(check_interval)
        self.origin = secrets.token_hex(8)
        self._client: coredis.Redis[str] = no_retry_client(
            url, timeout=self.timeout, max_connections=max_connections, decode_responses=True
        )
        self._keys = TaskKeys(prefix)
        self._create = self._client.register_script(CREATE)
        self._swap = self._client.register_script(SWAP)
        self._renew = self._client.register_script(RENEW)
        self._redis = FailClosed(
            self.url, "the task store", "the request", TaskStoreUnavailable, self.timeout, log
        )
        self._open = False
        #: Closed after use (the server stopped): works still ending record nothing.
        self._closed = False
        self._tasks: anyio.abc.TaskGroup | None = None
        #: The work this process runs, by task id: its cancellation.
        self._running: dict[str, Callable[[], None]] = {}
        #: Set when a running task's answers may have come (here, or seen by polling).
        self._wakes: dict[str, anyio.Event] = {}
        self._watchers: list[Watcher] = []
        self._renewed_at = -math.inf

    def __repr__(self) -> str:
        return f"RedisTaskStore({redacted(self.url)!r}, prefix={self.prefix!r})"

    # --- opening and closing --------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self._redis.open(self._client)
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self._tend)
        self._tasks.start_soon(self._subscribe)
        self._open = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._tasks is not None:  # (first: the loop never sees the store half closed)
            self._tasks.cancel_scope.cancel()
            await self._tasks.__aexit__(None, None, None)
            self._tasks = None
        self._open, self._closed = False, True
        await close_client(self._client, exc_type, exc, tb)

    async def check(self) -> None:
        """Ask Redis for a PONG; :class:`TaskStoreUnavailable` when it cannot answer."""
        await self._redis.answer(self._usable().ping())

    def __len__(self) -> int:
        """The tasks whose work runs in this process."""
        return len(self._running)

    # --- the method side ------------------------------------------------------------------

    async def create(self, *, principal: str | None, client: str, now: float) -> TaskRecord:
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
        # The one client of a connection that has only one has the whole pool (ClientShares):
        # its share is never met before the pool's bound is.
        share = self.max_tasks + 1 if client == LOCAL_CLIENT else self.max_tasks_per_client
        expiry = self._expiry_ms(record, now)
        created: Awaitable[list[int]] = self._usable_script(self._create)(
            keys=self._keys.of(record),
            args=[
                encode_task(record),
                expiry,
                _ms(now) + expiry,
                _ms(now),
                share,
                self.max_tasks,
                task_id,
                _ms(self.lease),
            ],
        )
        outcome, held = await self._redis.answer(created)
        if outcome == -1:
            refused = ShareRefusal.for_own_share(int(held), "tasks", "max_tasks_per_client", share)
            raise refused.error(TooManyTasks)
        if outcome == -2:
            full = ShareRefusal.for_full_pool("tasks", "max_tasks", self.max_tasks)
            raise full.error(TooManyTasks)
        return record

    async def find(self, task_id: Any, principal: str | None, now: float) -> TaskRecord:
        if not isinstance(task_id, str) or not 0 < len(task_id) <= _MAX_TASK_ID_CHARS:
            raise UnknownTask(task_id)
        gone = False

        async def settle_stale(one: MemoryTaskStore, record: TaskRecord, leased: bool) -> bool:
            """What time did to the record, written: past its TTL a finished task is gone
            and a running one fails "expired"; a running one whose lease lapsed fails
            with :data:`WORKER_STOPPED` (written only if the lease is still absent then)."""
            nonlocal gone
            # Another principal's task is not told apart from one that never existed.
            if record.principal != principal:
                raise UnknownTask(task_id)
            if record.keep_until <= now:
                gone = record.terminal
                if not gone:
                    await one.expire(task_id, now)
                return False
            if record.terminal or leased:
                return False
            stopped = m.ErrorObject(code=m.ErrorCode.INTERNAL_ERROR, message=WORKER_STOPPED)
            await one.change(task_id, "failed", now, error=stopped)
            return True

        record = await self._change(task_id, now, settle_stale)
        if record is None or gone:
            raise UnknownTask(task_id)
        return record

    async def answer(
        self, task_id: str, principal: str | None, answers: Mapping[str, Any], now: float
    ) -> None:
        async def apply(one: MemoryTaskStore, record: TaskRecord, leased: bool) -> None:
            await one.answer(task_id, principal, answers, now)

        if await self._change(task_id, now, apply) is None:
            raise UnknownTask(task_id)
        self._wake(task_id)

    async def cancel(self, task_id: Any, principal: str | None, now: float) -> None:
        await self.find(task_id, principal, now)  # (a lapsed lease settles it first)

        async def apply(one: MemoryTaskStore, record: TaskRecord, leased: bool) -> None:
            # No work runs in the one-record store: a running task settles to cancelled
            # here and now; the worker running it cancels its work when it looks next.
            await one.cancel(task_id, principal, now)

        if await self._change(task_id, now, apply) is None:
            raise UnknownTask(task_id)
        cancel_work = self._running.pop(task_id, None)
        if cancel_work is not None:  # it runs here: no need to wait for the next look
            cancel_work()

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
        async def apply(one: MemoryTaskStore, record: TaskRecord, leased: bool) -> None:
            await one.change(task_id, event, now, result=result, error=error)

        if self._closed:
            self._unrecorded(task_id, f"its outcome ({event})")
            return None
        return await self._change(task_id, now, apply)

    async def set_message(self, task_id: str, message: str, now: float) -> None:
        async def apply(one: MemoryTaskStore, record: TaskRecord, leased: bool) -> None:
            await one.set_message(task_id, message, now)

        if self._closed:
            self._unrecorded(task_id, "its status message")
            return
        await self._change(task_id, now, apply)

    async def ask(
        self, task_id: str, requests: Mapping[str, m.wire.InputRequest], now: float
    ) -> None:
        async def apply(one: MemoryTaskStore, record: TaskRecord, leased: bool) -> None:
            await one.ask(task_id, requests, now)

        if await self._change(task_id, now, apply) is None:
            raise m.LocalProtocolError("the task is gone (past its TTL)")

    async def wait_answers(self, task_id: str, keys: frozenset[str]) -> dict[str, Any]:
        taken: dict[str, Any] = {}

        async def take(one: MemoryTaskStore, record: TaskRecord, leased: bool) -> None:
            taken.clear()
            if keys <= record.answered.keys():
                taken.update({key: record.answered.pop(key) for key in keys})

        while True:
            wake = self._wakes.setdefault(task_id, anyio.Event())
            # (no clock here: the record keeps its expiry as it is)
            if await self._change(task_id, None, take) is None:
                raise m.LocalProtocolError("the task is gone (past its TTL)")
            if taken:
                return dict(taken)
            with anyio.move_on_after(self.check_interval):
                await wake.wait()
            if self._wakes.get(task_id) is wake and wake.is_set():
                del self._wakes[task_id]

    async def expire(self, task_id: str, now: float) -> None:
        async def apply(one: MemoryTaskStore, record: TaskRecord, leased: bool) -> None:
            await one.expire(task_id, now)

        if self._closed:
            self._unrecorded(task_id, "its expiry")
            return
        await self._change(task_id, now, apply)

    def attach(self, task_id: str, cancel_work: Callable[[], None] | None) -> bool:
        """Hold (or, with ``None``, drop) the running work's cancellation; its lease is
        renewed while it is held.  (Whether the task was settled meanwhile is Redis's to
        say: the next look cancels the work of one that was.)  ``False`` once the store
        is closed (the server stopped before the work started): run nothing."""
        if self._closed:
            return False
        if cancel_work is None:
            self._running.pop(task_id, None)
            self._wakes.pop(task_id, None)
        else:
            self._running[task_id] = cancel_work
        return True

    # --- inside: reading, settling, writing -------------------------------------------------

    def _unrecorded(self, task_id: str, what: str) -> None:
        """A work ending after the store closed (the server stopped): nothing is written;
        the task's lease lapses and it reads as stopped."""
        log.info("the task store is closed: %s of task %s is not recorded", what, task_id)

    async def _read(self, task_id: str) -> tuple[str | None, bool]:
        """The record as stored, and whether a worker holds its lease."""
        raw, lease = await self._redis.answer(
            self._usable().mget([self._keys.record(task_id), self._keys.lease(task_id)])
        )
        return raw, lease is not None

    async def _change(
        self,
        task_id: str,
        now: float | None,
        apply: Callable[[MemoryTaskStore, TaskRecord, bool], Awaitable[bool | None]],
    ) -> TaskRecord | None:
        """Read the record (and whether its lease is held), ``apply`` a change to it with
        the memory store's rules in a one-record store, and write it back if it is still
        the one read, else read again; ``None``: it is gone.  ``apply`` returning True:
        the write also needs the lease still absent.  ``now`` ``None``: the record's
        expiry is left as it is."""
        for _ in range(_MAX_ATTEMPTS):
            raw, leased = await self._read(task_id)
            if raw is None:
                return None
            record = decode_task(raw)
            changed: list[TaskRecord] = []
            one = MemoryTaskStore(
                max_tasks=1,
                max_tasks_per_client=1,
                max_pending_inputs=self.max_pending_inputs,
                max_result_bytes=self.max_result_bytes,
                ttl=record.ttl,
                poll_interval=record.poll_interval,
            )
            one._records[task_id] = record
            one.watch(changed.append)
            unleased = await apply(one, record, leased)
            written = encode_task(record)
            if written == raw:
                return record
            if now is None:
                expiry: int | str = "keep"
                goes = 0
            else:
                expiry = self._expiry_ms(record, now)
                goes = _ms(now) + expiry
            swapped: Awaitable[int] = self._usable_script(self._swap)(
                keys=self._keys.of(record),
                args=[
                    raw,
                    written,
                    expiry,
                    goes,
                    _ms(now or 0.0),
                    "1" if record.terminal else "0",
                    "1" if unleased else "0",
                    task_id,
                ],
            )
            if await self._redis.answer(swapped) == 1:
                if changed:
                    await self._announce(record)
                return record
        raise TaskStoreUnavailable("the task store is contended: too many concurrent changes")

    def _expiry_ms(self, record: TaskRecord, now: float) -> int:
        """Milliseconds from ``now`` until Redis drops the record: at its TTL; a running
        one :data:`EXPIRED_GRACE` later, so that a reader fails it "expired" first."""
        grace = 0.0 if record.terminal else EXPIRED_GRACE
        return max(1, _ms(record.keep_until - now + grace))

    # --- inside: the running worker's loop, and notifications ---------------------------

    async def _tend(self) -> None:
        """Every ``check_interval``: the running tasks' records (a settled or gone one has
        its work cancelled; an answered one wakes its work), and their leases renewed
        every third of ``lease``."""
        while True:
            await anyio.sleep(self.check_interval)
            try:
                await self._look()
            except TaskStoreUnavailable:
                pass  # (logged; the next look tries again)
            except Exception:  # (this loop must outlive any surprise: the leases hang on it)
                log.exception("the task store's look at its running tasks failed")

    async def _look(self) -> None:
        running = list(self._running)
        if not running:
            return
        raws = await self._redis.answer(
            self._usable().mget([self._keys.record(t) for t in running])
        )
        for task_id, raw in zip(running, raws, strict=True):
            record = None if raw is None else decode_task(raw)
            if record is None or record.terminal:
                cancel_work = self._running.pop(task_id, None)
                if cancel_work is not None:
                    cancel_work()
            elif record.answered:
                self._wake(task_id)
        now = anyio.current_time()
        live = [self._keys.lease(t) for t in running if t in self._running]
        if live and now - self._renewed_at >= self.lease / 3:
            await self._redis.answer(
                self._usable_script(self._renew)(keys=live, args=[_ms(self.lease)])
            )
            self._renewed_at = now

    def _wake(self, task_id: str) -> None:
        wake = self._wakes.pop(task_id, None)
        if wake is not None:
            wake.set()

    async def _announce(self, record: TaskRecord) -> None:
        """A status change: this process's watchers now, the others' by pub/sub."""
        self._tell(record)
        message = json.dumps({"origin": self.origin, "record": encode_task(record)})
        # (on failure, logged: the change is written; only other workers' listeners miss it)
        with contextlib.suppress(TaskStoreUnavailable):
            await self._redis.answer(self._usable().publish(self._keys.events, message))

    def _tell(self, record: TaskRecord) -> None:
        for watcher in list(self._watchers):
            watcher(record)

    async def _subscribe(self) -> None:
        """Tell this process's watchers of the status changes other workers publish."""
        while True:
            try:
                async with self._client.pubsub(
                    channels=[self._keys.events], ignore_subscribe_messages=True
                ) as pubsub:
                    async for message in pubsub:
                        self._heard(message.get("data"))
            except Exception as exc:  # (a broken subscription is made again, never fatal)
                log.warning("the task store's subscription %s broke: %r", redacted(self.url), exc)
                await anyio.sleep(self.check_interval)

    def _heard(self, data: Any) -> None:
        try:
            message = json.loads(data)
            if message["origin"] == self.origin:
                return  # told already
            record = decode_task(message["record"])
        except Exception as exc:  # (another deployment's, or a damaged message: not ours)
            log.warning("the task store's channel carried something else: %r", exc)
            return
        self._tell(record)

    # --- inside: Redis -----------------------------------------------------------------

    def _usable(self) -> coredis.Redis[str]:
        if self._closed:  # (a request still in flight as the server stops: fail closed)
            raise TaskStoreUnavailable("the task store is closed: the server is stopping")
        if not self._open:
            raise m.LocalProtocolError("RedisTaskStore is used inside `async with store:`")
        return self._client

    def _usable_script(self, script: T) -> T:
        self._usable()
        return script


def _ms(seconds: float) -> int:
    return math.ceil(seconds * 1000)
