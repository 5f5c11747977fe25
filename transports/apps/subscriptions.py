"""``subscriptions/listen`` (2026-07-28): an app's open listen streams.

The handler acknowledges the filter it agreed to, then forwards
``notifications/{tools,prompts,resources}/list_changed`` and
``notifications/resources/updated`` as the app announces them
(``McpApp.notify_tools_changed`` and friends; adding or removing a tool,
prompt or resource announces it), each tagged with the subscription id, until
the stream closes (the transport cancels the handler) or the app closes it
gracefully (``McpApp.close_subscriptions``: the request gets its result; the
stdio server calls it at the end of stdin, ``HttpServer.aclose`` at shutdown).
A 2025-era session has no such stream: there ``resources/subscribe`` is -32601.

Tasks (SEP-2663): a filter's ``taskIds`` (only from a request that declared the
tasks extension, else -32021) asks for ``notifications/tasks`` on each status
change of those tasks, its params the task as ``tasks/get`` would answer then.  The
acknowledgement names only the ids the caller may see (``task_methods``); at most
``MAX_LISTENED_TASKS`` ids per stream; changes of one task coalesce to its latest.

Bounds: at most ``max_streams`` listen streams at once, ``max_per_client`` of
one client (``mrtr_transports._shares``: more is -32000 naming the bound; over
HTTP the endpoint's listen pool refuses first, over WebSocket and stdio this
does); each
stream holds at most one pending notification per kind and per subscribed URI
(repeats coalesce), and a filter names at most ``MAX_SUBSCRIBED_URIS`` URIs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import anyio

import mrtr_core as m

from .._shares import CURRENT_CLIENT, ClientShares
from ..server.app import Outlet

#: ``_meta`` key tying a notification (and the final result) to its listen stream.
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: Most URIs one ``subscriptions/listen`` filter may name.
MAX_SUBSCRIBED_URIS = 256

#: A filter's ``*ListChanged`` flag -> the notification it asks for.
LIST_CHANGED = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
RESOURCE_UPDATED = "notifications/resources/updated"
#: A task's status, pushed to the streams that watch it (SEP-2663).
TASK_NOTIFICATION = "notifications/tasks"
#: One client's share of the listen streams.
DEFAULT_MAX_SUBSCRIPTIONS_PER_CLIENT = 32


def _wakeup() -> anyio.Event:
    """An event of the loop the stream runs on (trio, or asyncio: say uvicorn running
    ``mrtr_transports.asgi``)."""
    return anyio.Event()


class Listener:
    """One ``subscriptions/listen`` stream: what it wants, and what is due on it."""

    def __init__(self, subscription_id: m.RequestId, agreed: Mapping[str, Any]) -> None:
        self.subscription_id = subscription_id
        self.methods = {LIST_CHANGED[k] for k in LIST_CHANGED if agreed.get(k)}
        self.uris = frozenset(agreed.get("resourceSubscriptions", ()))
        self.task_ids = frozenset(agreed.get("taskIds", ()))
        #: Due notifications by (method, uri); repeats coalesce, so this stays small.
        self.pending: dict[tuple[str, str | None], None] = {}
        #: Due ``notifications/tasks`` params by task id: the latest of each.
        self.task_updates: dict[str, Callable[[], dict[str, Any]]] = {}
        self.wake = _wakeup()
        self.closing = False

    def offer(self, method: str, uri: str | None) -> None:
        wanted = uri in self.uris if method == RESOURCE_UPDATED else method in self.methods
        if wanted:
            self.pending[(method, uri)] = None
            self.wake.set()

    def offer_task(self, task_id: str, params: Callable[[], dict[str, Any]]) -> None:
        if task_id in self.task_ids:
            self.task_updates[task_id] = params
            self.wake.set()


class Subscriptions:
    """The listen streams open on one app, and the announcements they wait for."""

    def __init__(
        self, max_streams: int, max_per_client: int = DEFAULT_MAX_SUBSCRIPTIONS_PER_CLIENT
    ) -> None:
        self.max_streams = max_streams
        self.shares = ClientShares(
            max_streams,
            max_per_client,
            what="listen streams",
            total_setting="max_subscriptions",
            per_client_setting="max_subscriptions_per_client",
        )
        self._listeners: set[Listener] = set()

    def __len__(self) -> int:
        return len(self._listeners)

    def announce(self, method: str, uri: str | None = None) -> None:
        for listener in self._listeners:
            listener.offer(method, uri)

    def announce_task(self, task_id: str, params: Callable[[], dict[str, Any]]) -> None:
        """A task's status changed: ``params()`` is its ``notifications/tasks`` params
        (made only for a stream that watches it)."""
        for listener in self._listeners:
            listener.offer_task(task_id, params)

    def close(self) -> None:
        """End every listen stream gracefully (shutdown): each gets its result."""
        for listener in self._listeners:
            listener.closing = True
            listener.wake.set()

    async def listen(
        self,
        request: m.Request,
        outlet: Outlet,
        params: Mapping[str, Any],
        offers: Collection[str],
        tasks: Callable[[Any], Awaitable[list[str]]] | None = None,
    ) -> dict[str, Any]:
        """Serve one ``subscriptions/listen`` request; ``offers`` are the kinds the app
        serves; ``tasks`` reads a filter's ``taskIds`` into the ids it may watch."""
        wanted = params.get("notifications")
        if not isinstance(wanted, Mapping):
            raise m.MrtrError(
                "subscriptions/listen needs a notifications filter", code=m.ErrorCode.INVALID_PARAMS
            )
        uris = wanted.get("resourceSubscriptions", [])
        if not (isinstance(uris, list) and all(isinstance(u, str) for u in uris)):
            raise m.MrtrError(
                "resourceSubscriptions must be a list of URIs", code=m.ErrorCode.INVALID_PARAMS
            )
        if len(uris) > MAX_SUBSCRIBED_URIS:
            raise m.MrtrError(
                f"at most {MAX_SUBSCRIBED_URIS} resourceSubscriptions",
                code=m.ErrorCode.INVALID_PARAMS,
            )
        # Agree to what we can deliver; what we cannot is left out of the acknowledgement.
        offered = {
            "toolsListChanged": "tools" in offers,
            "promptsListChanged": "prompts" in offers,
            "resourcesListChanged": "resources" in offers,
        }
        agreed: dict[str, Any] = {
            k: True for k, ok in offered.items() if ok and wanted.get(k) is True
        }
        if uris and "resources" in offers:
            agreed["resourceSubscriptions"] = list(dict.fromkeys(uris))
        if "taskIds" in wanted and tasks is not None:
            task_ids = await tasks(wanted["taskIds"])
            if task_ids:
                agreed["taskIds"] = task_ids
        client = CURRENT_CLIENT.get()
        refused = self.shares.admit(client)
        if refused is not None:
            raise refused.error()
        listener = Listener(request.id, agreed)
        tag = {SUBSCRIPTION_ID: request.id}
        self._listeners.add(listener)
        try:
            await outlet.notify(
                "notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": agreed}
            )
            while True:
                await listener.wake.wait()
                listener.wake = _wakeup()
                due, listener.pending = listener.pending, {}
                for method, uri in due:
                    note: dict[str, Any] = {"_meta": tag}
                    if uri is not None:
                        note["uri"] = uri
                    await outlet.notify(method, note)
                changed, listener.task_updates = listener.task_updates, {}
                for task_params in changed.values():
                    await outlet.notify(TASK_NOTIFICATION, {**task_params(), "_meta": tag})
                if listener.closing:
                    return {"_meta": tag}
        finally:
            self._listeners.discard(listener)
            self.shares.release(client)


__all__ = [
    "DEFAULT_MAX_SUBSCRIPTIONS_PER_CLIENT",
    "LIST_CHANGED",
    "MAX_SUBSCRIBED_URIS",
    "RESOURCE_UPDATED",
    "SUBSCRIPTION_ID",
    "TASK_NOTIFICATION",
    "Listener",
    "Subscriptions",
]
