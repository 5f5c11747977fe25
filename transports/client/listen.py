"""``subscriptions/listen`` on the client, and what the server tells us unasked.

The model
---------
In 2026-07-28 a server sends ``notifications/{tools,prompts,resources}/list_changed``
and ``notifications/resources/updated`` only on a *listen stream*: a
``subscriptions/listen`` request the client opens with a filter (which kinds,
which resource URIs), that the server acknowledges first
(``notifications/subscriptions/acknowledged``, naming what it agreed to), then
keeps open, tagging every notification with the request's id
(``_meta["io.modelcontextprotocol/subscriptionId"]``).  It ends in one of three
ways: the client cancels it (HTTP: closes the stream; stdio:
``notifications/cancelled``), the server ends it *gracefully* with a result
whose ``_meta`` names it (shutdown, or a stream's lifetime on our HTTP
server), or the transport drops.

:meth:`Client.listen <mrtr_transports.client.client.Client.listen>` is an
async context manager around one :class:`Subscription`: entered once the
server acknowledged, left by cancelling the stream on the wire.  Meanwhile
each notification goes to

* the handlers registered on the client (``client.on_list_changed("tools",
  handler)``, ``client.on_resource_updated(handler)``): called in the order
  notifications arrive; one that returns an awaitable runs as a task (so an
  ``async def`` handler may ``await client.list_tools()``).  A 2025-era
  server's unsolicited notifications (no subscription id) reach them too;
  a 2025-era server has no listen streams (``listen`` raises its -32601);
* the subscription itself, an async iterator of the notifications (repeats of
  one kind and URI that were not read yet coalesce into one);
* the client's response cache, which drops what the notification made stale
  (:mod:`~mrtr_transports.client.cache`), before any handler runs.

With ``reopen=True`` (the default) a stream that ends is opened again: at once
after a graceful end (unless the stream lived under :data:`MIN_LIFETIME`
seconds), after a backoff when it dropped (``initial_backoff`` doubling up to
``max_backoff``, with jitter), and after the server's ``retryAfterSeconds``
(the JSON-RPC error's ``data``, as our HTTP server's 429/503 refusal carries
it; never less than the backoff) when it was refused as busy.  A stream that
lived :data:`MIN_LIFETIME` seconds or more resets the backoff.  An error that
retrying cannot cure (the server does not know ``subscriptions/listen``: a
2025-era server) ends the subscription with that error; ``reopen=False`` ends
it at the first end.

Bounds: notifications not yet read from a subscription are at most
``max_pending`` (by kind and URI; more are dropped with a warning, the
handlers still see them); a ``retryAfterSeconds`` is honoured up to
:data:`MAX_RETRY_AFTER` seconds.
"""

from __future__ import annotations

import inspect
import logging
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import anyio
from anyio.abc import TaskGroup

import mrtr_core as m

from .errors import CallError, CallTimeout, ClientError, TransportError

if TYPE_CHECKING:
    from .cache import ResponseCache
    from .client import Client

__all__ = [
    "ACKNOWLEDGED",
    "LIST_CHANGED",
    "MAX_RETRY_AFTER",
    "MIN_LIFETIME",
    "RESOURCE_UPDATED",
    "SUBSCRIPTION_ID",
    "Handler",
    "ListKind",
    "ListenOptions",
    "Notifications",
    "Subscription",
    "listen",
]

logger = logging.getLogger("mrtr.client")

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
RESOURCE_UPDATED = "notifications/resources/updated"
ListKind = Literal["tools", "prompts", "resources"]
LIST_CHANGED: Mapping[ListKind, str] = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}
#: Seconds a stream must have lived for its graceful end to be reopened at once.
MIN_LIFETIME = 1.0
#: The longest ``retryAfterSeconds`` honoured.
MAX_RETRY_AFTER = 300.0
#: A handler of a notification; what it returns, if awaitable, is run as a task.
Handler = Callable[[m.Notification], object]

_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class Notifications:
    """Where the server's notifications go (one per client): the log, the cache,
    the open subscriptions and the handlers registered on the client."""

    def __init__(
        self,
        task_group: TaskGroup,
        cache: ResponseCache | None,
        on_notification: Callable[[m.Notification], None] | None,
    ) -> None:
        self._task_group = task_group
        self._cache = cache
        self._on_notification = on_notification
        self.handlers: dict[str, list[Handler]] = {}
        #: Open listen streams by their request id (= their subscription id).
        self.streams: dict[m.RequestId, Subscription] = {}

    def add_handler(self, method: str, handler: Handler) -> None:
        self.handlers.setdefault(method, []).append(handler)

    def deliver(self, note: m.Notification) -> None:
        """One notification from the server (called from the client's pump)."""
        params = note.params or {}
        if note.method == "notifications/message":
            level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
            logger.log(level, "server log [%s]: %s", params.get("logger"), params.get("data"))
        if self._cache is not None:
            self._cache.invalidate(note.method, params)  # before any handler looks again
        meta = params.get("_meta")
        tag = meta.get(SUBSCRIPTION_ID) if isinstance(meta, Mapping) else None
        stream = self.streams.get(tag) if isinstance(tag, (str, int)) else None
        if stream is not None and note.method == ACKNOWLEDGED:
            stream.acknowledge(params.get("notifications"))
        elif stream is not None or tag is None:
            # On a stream of ours, or untagged: a 2025-era session's unsolicited notices
            # reach the same handlers (a tag of a stream we closed is a late straggler).
            if stream is not None:
                stream.offer(note)
            for handler in self.handlers.get(note.method, ()):
                self._run(handler, note, self._task_group)
        if self._on_notification is not None:
            self._run(self._on_notification, note, self._task_group)

    def _run(self, handler: Handler, note: m.Notification, task_group: TaskGroup) -> None:
        try:
            outcome = handler(note)
        except Exception:
            logger.exception("a notification handler failed on %s", note.method)
            return
        if inspect.isawaitable(outcome):
            task_group.start_soon(_await_logged, outcome, note.method)


async def _await_logged(outcome: Awaitable[object], method: str) -> None:
    try:
        await outcome
    except Exception:
        logger.exception("a notification handler failed on %s", method)


class Subscription:
    """One subscription (see the module docstring); reopened as its options say.

    ``acknowledged`` is the filter the server agreed to on the stream open now;
    ``opened`` counts the streams opened, ``graceful_ends`` the graceful ends;
    ``error`` is why it ended for good, if it did with an error.
    """

    def __init__(
        self,
        client: Client,
        notifications: Mapping[str, Any],
        *,
        reopen: bool,
        initial_backoff: float,
        max_backoff: float,
        max_pending: int,
    ) -> None:
        self._client = client
        self.filter = dict(notifications)
        self.reopen = reopen
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_pending = max_pending
        self.acknowledged: dict[str, Any] | None = None
        self.opened = 0
        self.graceful_ends = 0
        self.error: ClientError | None = None
        self.ended = anyio.Event()
        self._request_id: m.RequestId | None = None
        self._first = anyio.Event()  # the first acknowledgement, or the end
        self._pending: dict[tuple[str, str | None], m.Notification] = {}
        self._wake = anyio.Event()

    # --- Reading it ------------------------------------------------------------------------

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> m.Notification:
        while not self._pending:
            if self.ended.is_set():
                if self.error is not None:
                    raise self.error
                raise StopAsyncIteration
            await self._wake.wait()
            self._wake = anyio.Event()
        key = next(iter(self._pending))
        return self._pending.pop(key)

    # --- Fed by Notifications --------------------------------------------------------------

    def acknowledge(self, agreed: object) -> None:
        self.acknowledged = dict(agreed) if isinstance(agreed, Mapping) else {}
        self.opened += 1
        self._first.set()

    def offer(self, note: m.Notification) -> None:
        uri = (note.params or {}).get("uri")
        key = (note.method, uri if isinstance(uri, str) else None)
        if key not in self._pending and len(self._pending) >= self.max_pending:
            logger.warning(
                "dropped %s: %d notifications not read yet", note.method, self.max_pending
            )
            return
        self._pending[key] = note
        self._wake.set()

    # --- The streams -----------------------------------------------------------------------

    def _opening(self, request_id: m.RequestId) -> None:
        self._request_id = request_id
        self._client._notes.streams[request_id] = self

    async def run(self) -> None:
        """Open streams until the subscription ends (see the module docstring)."""
        backoff = self.initial_backoff
        try:
            while True:
                started = anyio.current_time()
                try:
                    await self._client._plain_request(
                        "subscriptions/listen",
                        {"notifications": self.filter},
                        on_id=self._opening,
                    )
                except ClientError as exc:
                    if anyio.current_time() - started >= MIN_LIFETIME:
                        backoff = self.initial_backoff  # it was healthy for a while
                    wait = self._retry_after(exc, backoff)
                    if wait is None:
                        self.error = exc
                        return
                    logger.info("listen stream ended (%s): reopening in %.1f s", exc, wait)
                else:
                    self.graceful_ends += 1
                    if not self.reopen:
                        return
                    lived = anyio.current_time() - started
                    wait = 0.0 if lived >= MIN_LIFETIME else backoff
                finally:
                    if self._request_id is not None:
                        self._client._notes.streams.pop(self._request_id, None)
                        self._request_id = None
                if wait > 0:
                    backoff = min(backoff * 2, self.max_backoff)
                    await anyio.sleep(wait)
                else:
                    backoff = self.initial_backoff
        finally:
            self.ended.set()
            self._first.set()
            self._wake.set()

    def _retry_after(self, exc: ClientError, backoff: float) -> float | None:
        """Seconds to wait before reopening after ``exc``, or ``None``: do not."""
        if not self.reopen:
            return None
        jittered = backoff * (1 + random.random() / 2)
        if isinstance(exc, CallError):
            data = exc.data if isinstance(exc.data, Mapping) else {}
            after = data.get("retryAfterSeconds")
            if exc.code != m.ErrorCode.SERVER_BUSY:
                return None  # (e.g. -32601: the server has no listen streams)
            if isinstance(after, (int, float)) and not isinstance(after, bool) and after >= 0:
                # At least what the server asked (up to the cap; inf -> the cap, nan fails
                # >=), and never less than the backoff: "0" again and again does not spin.
                return max(min(float(after), MAX_RETRY_AFTER), jittered)
            return jittered
        if isinstance(exc, TransportError):
            if exc.kind == "closed":
                return None
            if exc.kind == "http" and exc.status not in (429, 503):
                return None
            return jittered
        return None


class ListenOptions(TypedDict, total=False):
    """The options of :func:`listen` (and ``Client.listen``)."""

    tools: bool
    prompts: bool
    resources: bool
    resource_uris: Collection[str]
    reopen: bool
    ack_timeout: float | None
    initial_backoff: float
    max_backoff: float
    max_pending: int


@asynccontextmanager
async def listen(
    client: Client,
    *,
    tools: bool = False,
    prompts: bool = False,
    resources: bool = False,
    resource_uris: Collection[str] = (),
    reopen: bool = True,
    ack_timeout: float | None = 10.0,
    initial_backoff: float = 0.5,
    max_backoff: float = 30.0,
    max_pending: int = 256,
) -> AsyncIterator[Subscription]:
    """A :class:`Subscription` for the kinds named (``tools``, ``prompts``,
    ``resources``: their ``list_changed``; ``resource_uris``: their
    ``resources/updated``), entered once the server acknowledged it (within
    ``ack_timeout`` seconds, else ``CallTimeout``) or raising why it could not
    be opened; cancelled on the wire on exit."""
    if isinstance(resource_uris, str):
        raise TypeError("resource_uris is a collection of URIs, not one URI")
    wanted: dict[str, Any] = {}
    for flag, kind in (("toolsListChanged", tools), ("promptsListChanged", prompts)):
        if kind:
            wanted[flag] = True
    if resources:
        wanted["resourcesListChanged"] = True
    if resource_uris:
        wanted["resourceSubscriptions"] = list(dict.fromkeys(resource_uris))
    sub = Subscription(
        client,
        wanted,
        reopen=reopen,
        initial_backoff=initial_backoff,
        max_backoff=max_backoff,
        max_pending=max_pending,
    )
    # The streams run in the client's task_group, so the caller's exceptions pass untouched.
    scope = anyio.CancelScope()
    client._task_group.start_soon(_run_in, scope, sub)
    try:
        started = anyio.current_time()
        with anyio.move_on_after(math.inf if ack_timeout is None else ack_timeout):
            await sub._first.wait()
        if not sub._first.is_set():
            raise CallTimeout(anyio.current_time() - started, ack_timeout, "total")
        if sub.acknowledged is None:  # it ended before any acknowledgement
            raise sub.error or TransportError(
                "the listen stream ended before it was acknowledged", kind="disconnect"
            )
        yield sub
    finally:
        scope.cancel()  # (the request's own cleanup cancels it on the wire)
        with anyio.CancelScope(shield=True):
            await sub.ended.wait()


async def _run_in(scope: anyio.CancelScope, sub: Subscription) -> None:
    with scope:
        await sub.run()
