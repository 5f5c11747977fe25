"""The client's response cache: ``ttlMs``/``cacheScope`` honoured, on a pluggable store.

The model
---------
The rules (what may be cached, the key, the public/private partition,
freshness) are the core's (``mrtr_core.caching``); this module
gives them a clock, a store and a place in the client:

* :class:`ResponseCacheStore` is what a store must do (``get``, ``set``,
  ``evict``), all ``async`` so a store may live elsewhere (a shared key-value
  service); :class:`MemoryCacheStore` is the default, in memory, bounded by
  entries and bytes, least recently used out first.  A store holds each result
  as its JSON text: what comes out is a new object every time, so a caller that
  changes a result cannot change the cache.
* :class:`ResponseCache` is one client's view of a store: the server it talks
  to (its URL, or its command line for stdio: never the self-reported
  ``serverInfo``), the principal (the authorization context), and the clock
  (``anyio.current_time``, or the store's own ``clock``).  ``Client(cache=store, principal=...)``
  makes one.
* **Whose private entry.**  A ``cacheScope: "private"`` result is only ever
  served to the principal it was stored for.  Without ``principal=`` the
  principal is derived from *everything the caller set that may identify it*
  (:func:`default_principal`): a digest of every header the caller gave
  (``Authorization``, ``X-Api-Key``, ``Cookie``, a tenant; names lower-cased,
  sorted, with their values) and of the URL's query string (``?key=...``).  Any
  difference in what identifies the caller separates the entries; the same
  credentials share them.  Why every header and not a list of credential
  headers: no list can name every API-key header a server may use, and a
  header that identifies no one costs only a miss.  When the caller set
  nothing at all (no header, no query; stdio), nothing says who the user is,
  and two such clients may still not be the same user (a 2025 session, a
  server that tells its peers apart by address): private entries are then
  this client's own (a principal unique to it), public ones still shared.
  Clients of one user that should share private entries name one ``principal=``.
* **Invalidation** is synchronous: a ``list_changed`` or ``resources/updated``
  notification (delivered while the client listens,
  :mod:`~mrtr_transports.client.listen`) records the time, and an entry whose
  request went out before it is never served again, nor stored if its answer
  was still on the way.  The store's copies are dropped at the next cache use.
* A store that fails (raises) costs a cache miss and a warning, never the
  request.

Bounds: :class:`MemoryCacheStore` holds at most ``max_entries`` entries and
``max_bytes`` bytes of JSON text (an entry larger than that is not stored);
the invalidation times kept per resource URI are at most
:data:`MAX_INVALIDATED_KEYS` (past that, the oldest is folded into one time
for every ``resources/read``: stale sooner, never served stale).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import anyio

from mrtr_core.caching import (
    CacheEntry,
    CacheKey,
    invalidations,
    lookup_keys,
    new_entry,
    request_cacheable,
    result_policy,
    servable,
    store_key,
)
from mrtr_core.caching._policy import CacheScope, cache_params

__all__ = [
    "MAX_INVALIDATED_KEYS",
    "CacheMode",
    "MemoryCacheStore",
    "ResponseCache",
    "ResponseCacheStore",
    "cache_server",
    "default_principal",
    "flow_fetch",
    "plain_fetch",
]

logger = logging.getLogger("mrtr.client.cache")

#: Per call: ``"use"`` serves a fresh entry (else fetches and stores), ``"refresh"``
#: always fetches and stores, ``"bypass"`` fetches without reading or writing the cache.
CacheMode = Literal["use", "refresh", "bypass"]
#: Invalidation times kept per (method, params) before they fold into one per method.
MAX_INVALIDATED_KEYS = 1024


class ResponseCacheStore(Protocol):
    """Where cached results live.  Keys and entries are the core's
    ``CacheKey``/``CacheEntry`` (plain frozen values: a store may serialise them).

    The entries' times are the client's clock, ``anyio.current_time`` (meaningful
    within one run of the loop).  A store shared across processes must say which
    clock its entries use with a ``clock`` attribute (e.g. ``clock = time.time``).
    """

    async def get(self, key: CacheKey) -> CacheEntry | None:
        """The entry under ``key``, or ``None``."""
        ...

    async def set(self, key: CacheKey, entry: CacheEntry) -> None:
        """Keep ``entry`` under ``key`` (replacing what was there)."""

    async def delete(self, key: CacheKey) -> None:
        """Drop the entry under ``key``, if any."""

    async def evict(self, server: str, method: str, params: str | None = None) -> None:
        """Drop every entry of ``server`` for ``method`` (only those whose params
        key is ``params`` when given), in every partition."""


class MemoryCacheStore:
    """The default store: in memory, least recently used out first, bounded by
    ``max_entries`` and ``max_bytes`` (the entries' JSON text)."""

    def __init__(self, *, max_entries: int = 1024, max_bytes: int = 16 * 1024 * 1024) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("max_entries and max_bytes must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[CacheKey, CacheEntry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """Bytes of JSON text held."""
        return self._bytes

    async def get(self, key: CacheKey) -> CacheEntry | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    async def set(self, key: CacheKey, entry: CacheEntry) -> None:
        self._drop(key)
        if entry.size > self.max_bytes:
            return  # (larger than the whole store: never kept)
        self._entries[key] = entry
        self._bytes += entry.size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest)

    async def delete(self, key: CacheKey) -> None:
        self._drop(key)

    async def evict(self, server: str, method: str, params: str | None = None) -> None:
        doomed = [
            key
            for key in self._entries
            if key.server == server
            and key.method == method
            and (params is None or key.params == params)
        ]
        for key in doomed:
            self._drop(key)

    def _drop(self, key: CacheKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size


def cache_server(link: object) -> str:
    """The server a link talks to, as a cache partition: its URL (HTTP), its
    command line (stdio), else a name unique to this link (no reuse across links)."""
    url = getattr(link, "url", None)
    if isinstance(url, str):
        return url
    argv = getattr(link, "argv", None)
    if isinstance(argv, list):
        return json.dumps(["stdio", *map(str, argv)])
    return f"{type(link).__name__}@{id(link):x}"


def default_principal(link: object) -> str | None:
    """A digest of what identifies the caller of ``link``: every header it set (names
    lower-cased, sorted, with their values) and its URL's query string; ``None`` when
    it set neither (see the module docstring)."""
    # (HttpLink's and WsLink's extra_headers are the caller's own; a stdio link has none.)
    headers = getattr(link, "extra_headers", None) or ()
    named = sorted((str(name).lower(), str(value)) for name, value in headers)
    url = getattr(link, "url", None)
    query = urlsplit(url).query if isinstance(url, str) else ""
    if not named and not query:
        return None
    identity = json.dumps({"headers": named, "query": query}, ensure_ascii=False)
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
    return f"caller:{digest[:32]}"


def _own_principal() -> str:
    """A principal no other client has: private entries stay this client's."""
    return f"client:{secrets.token_hex(16)}"


class ResponseCache:
    """One client's use of a store (see the module docstring)."""

    def __init__(
        self,
        store: ResponseCacheStore,
        server: str,
        principal: str | None = None,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self.store = store
        self.server = server
        self.principal = principal
        self._clock = clock
        #: (method, params key or None for all) -> when it was last made stale.
        self._invalidated: OrderedDict[tuple[str, str | None], float] = OrderedDict()
        #: Store evictions still to do (done at the next use of the cache).
        self._pending: dict[tuple[str, str | None], None] = {}
        self.hits = 0
        self.misses = 0

    @classmethod
    def for_link(
        cls, store: ResponseCacheStore, link: object, principal: str | None = None
    ) -> ResponseCache:
        """The cache of a client over ``link``: its server is :func:`cache_server`'s,
        its principal ``principal``, else :func:`default_principal`'s, else one of its own."""
        clock = getattr(store, "clock", None)  # (a store shared across processes has one)
        return cls(
            store,
            cache_server(link),
            principal or default_principal(link) or _own_principal(),
            clock if callable(clock) else anyio.current_time,
        )

    async def fetch(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        fetch: Callable[[], Awaitable[tuple[dict[str, Any], bool]]],
        mode: CacheMode = "use",
    ) -> dict[str, Any]:
        """A fresh cached result of ``method`` with ``params``, else ``fetch()``'s
        (``(result, storable)``: ``storable`` false for a result that needed
        retries), stored when its hints allow."""
        if mode == "bypass" or not request_cacheable(method, params):
            result, _ = await fetch()
            return result
        await self._flush()
        if mode == "use":
            cached = await self._lookup(method, params)
            if cached is not None:
                self.hits += 1
                return cached
        self.misses += 1
        requested_at = self._clock()
        result, storable = await fetch()
        if storable:
            await self._store(method, params, result, requested_at)
        return result

    def invalidate(self, method: str, params: Mapping[str, Any] | None) -> None:
        """The server's notification ``method``: what it makes stale is never served
        (nor stored, if its answer is still on the way) from now on."""
        now = self._clock()
        for target in invalidations(method, params):
            self._invalidated[target] = now
            self._invalidated.move_to_end(target)
            self._pending[target] = None
        while len(self._invalidated) > MAX_INVALIDATED_KEYS:
            (old_method, _), when = self._invalidated.popitem(last=False)
            whole = (old_method, None)
            self._invalidated[whole] = max(when, self._invalidated.get(whole, -math.inf))
        if len(self._pending) > MAX_INVALIDATED_KEYS:  # (fold: evict whole methods instead)
            self._pending = {(stale, None): None for stale, _ in self._pending}

    def _invalidated_at(self, method: str, params: str) -> float:
        return max(
            self._invalidated.get((method, None), -math.inf),
            self._invalidated.get((method, params), -math.inf),
        )

    async def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        for method, params in pending:
            try:
                await self.store.evict(self.server, method, params)
            except Exception:
                logger.warning("the cache store failed to evict %s", method, exc_info=True)

    async def _lookup(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any] | None:
        now = self._clock()
        for key in lookup_keys(self.server, method, params, self.principal):
            try:
                entry = await self.store.get(key)
            except Exception:
                logger.warning("the cache store failed to read %s", method, exc_info=True)
                return None
            if entry is None or not servable(
                entry, key, now, self._invalidated_at(method, key.params)
            ):
                continue
            try:
                result = json.loads(entry.body)
            except (ValueError, RecursionError):
                continue  # (a store that mangled it: a miss)
            if isinstance(result, dict):
                return result
        return None

    async def _store(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        result: Mapping[str, Any],
        requested_at: float,
    ) -> None:
        policy = result_policy(method, params, result)
        if policy is None:
            return
        if requested_at <= self._invalidated_at(method, cache_params(params)):
            return  # made stale while it was on the way
        try:
            body = json.dumps(result, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return
        key = store_key(self.server, method, params, self.principal, policy.scope)
        other: CacheScope = "private" if policy.scope == "public" else "public"
        entry = new_entry(body, policy, requested_at, self._clock())
        try:
            await self.store.set(key, entry)
            # A result whose scope changed must not be shadowed by its older copy.
            await self.store.delete(store_key(self.server, method, params, self.principal, other))
        except Exception:
            logger.warning("the cache store failed to write %s", method, exc_info=True)


def plain_fetch(
    fetch: Callable[[], Awaitable[dict[str, Any]]],
) -> Callable[[], Awaitable[tuple[dict[str, Any], bool]]]:
    """A plain request for :meth:`ResponseCache.fetch`: one leg, always storable."""

    async def fetched() -> tuple[dict[str, Any], bool]:
        return await fetch(), True

    return fetched


def flow_fetch(
    flow: Callable[..., Awaitable[dict[str, Any]]],
) -> Callable[[], Awaitable[tuple[dict[str, Any], bool]]]:
    """A call's flow for :meth:`ResponseCache.fetch`: storable only if it took no
    retry (its result came from the first leg of the flow that answered)."""

    async def fetched() -> tuple[dict[str, Any], bool]:
        rounds: list[int] = []
        result = await flow(on_rounds=rounds.append)
        return result, rounds[-1:] == [0]

    return fetched
