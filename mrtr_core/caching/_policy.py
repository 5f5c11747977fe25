"""Client-side response caching (2026-07-28 ``CacheableResult``): the pure rules.

The model
---------
Six methods answer with results that carry two hints, ``ttlMs`` (how long the
result stays fresh, like ``Cache-Control: max-age``) and ``cacheScope``
(``"public"``: the same for every caller; ``"private"``: only for the
authorization context that fetched it).  A client may serve a fresh result
again instead of asking, under four rules this module decides without any I/O
or clock (the caller passes ``now``):

* **What may be cached**: a complete result of a cacheable method, from a
  request that was not an MRTR retry (one carrying ``inputResponses`` or
  ``requestState``: its result depends on answers that are not in the key),
  whose ``ttlMs`` is a positive number.  ``ttlMs`` absent, 0 or negative means
  "immediately stale": not stored.  A server cannot pin an entry for longer
  than :data:`MAX_CACHE_TTL_MS`.
* **The key**: the server, the partition, the method and the request's
  result-affecting params (every param but ``_meta``) as canonical JSON.  So
  ``tools/list`` with a cursor (one page) and without are distinct entries, as
  the spec's pagination rules want.
* **The partition**: a ``"public"`` result lives in the server's shared
  partition (``None``); anything else (``"private"``, or a scope we do not
  know) in the caller's own partition, named by its *principal* (``""`` when
  the caller named none: one authorization context).  A lookup tries the own
  partition first, then the shared one, and serves a shared entry only if it
  was stored as ``"public"`` (a store shared with a careless writer cannot leak
  private bodies through the shared partition).
* **Freshness**: an entry is fresh while ``now < received + ttlMs`` and no
  invalidation happened since its request went out (``invalidated_at``: a
  ``list_changed`` or ``resources/updated`` notification; comparing with the
  time the request was *sent* means an answer that was already in flight when
  the notification came is never stored as fresh).

:func:`invalidations` names what a notification makes stale.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .._errors import LocalProtocolError
from .._meta import CACHEABLE_METHODS

CacheScope = Literal["public", "private"]

#: The longest ``ttlMs`` honoured (24 h): a server cannot pin an entry for ever.
MAX_CACHE_TTL_MS = 86_400_000
#: The params that make a request an MRTR retry; their results are never cached.
RETRY_PARAMS = ("inputResponses", "requestState")

#: Notification -> the cached methods it makes stale (every entry of each).
_LIST_CHANGED: Mapping[str, tuple[str, ...]] = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}
RESOURCE_UPDATED = "notifications/resources/updated"


@attrs.frozen
class CacheKey:
    """Where one cached result lives.  ``partition`` is ``None`` for the server's
    shared (public) partition, else the principal (``""``: the only one)."""

    server: str
    partition: str | None
    method: str
    params: str


@attrs.frozen
class CachePolicy:
    """What a result allows: kept ``ttl_ms`` milliseconds, in ``scope``."""

    ttl_ms: float
    scope: CacheScope


@attrs.frozen
class CacheEntry:
    """One cached result: its JSON text, its scope, when its request went out and
    when it stops being fresh (the caller's clock, in seconds)."""

    body: str
    scope: CacheScope
    requested_at: float
    expires_at: float

    @property
    def size(self) -> int:
        """Bytes of the body (UTF-8), what a store's byte bound counts."""
        return len(self.body.encode("utf-8", "surrogatepass"))


def is_retry(params: Mapping[str, Any] | None) -> bool:
    """Whether ``params`` make the request an MRTR retry (never cached)."""
    return params is not None and any(name in params for name in RETRY_PARAMS)


def request_cacheable(method: str, params: Mapping[str, Any] | None) -> bool:
    """Whether the result of ``method`` with ``params`` may be looked up or stored."""
    return method in CACHEABLE_METHODS and not is_retry(params)


def cache_params(params: Mapping[str, Any] | None) -> str:
    """The result-affecting params (all but ``_meta``) as canonical JSON: sorted
    keys, no spaces.  ``LocalProtocolError`` for params JSON cannot carry."""
    kept = {k: v for k, v in (params or {}).items() if k != "_meta"}
    try:
        return json.dumps(
            kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise LocalProtocolError(f"the request params cannot be a cache key: {exc}") from exc


def partition_for(scope: str, principal: str | None) -> str | None:
    """The partition a result of ``scope`` is stored in: ``None`` (shared) for
    ``"public"``, the principal's own (``""`` when unnamed) for anything else."""
    return None if scope == "public" else (principal or "")


def lookup_keys(
    server: str, method: str, params: Mapping[str, Any] | None, principal: str | None
) -> tuple[CacheKey, CacheKey]:
    """The keys to try, in order: the principal's own partition, then the shared one."""
    text = cache_params(params)
    return (
        CacheKey(server, partition_for("private", principal), method, text),
        CacheKey(server, None, method, text),
    )


def store_key(
    server: str,
    method: str,
    params: Mapping[str, Any] | None,
    principal: str | None,
    scope: CacheScope,
) -> CacheKey:
    """The key a result of ``scope`` is stored under."""
    return CacheKey(server, partition_for(scope, principal), method, cache_params(params))


def result_policy(
    method: str, params: Mapping[str, Any] | None, result: Mapping[str, Any]
) -> CachePolicy | None:
    """What ``result`` (the answer to ``method`` with ``params``) allows, or ``None``
    when it must not be stored (see the module docstring)."""
    if not request_cacheable(method, params):
        return None
    if result.get("resultType", "complete") != "complete":
        return None
    ttl = result.get("ttlMs")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        return None
    if not (math.isfinite(ttl) and ttl > 0):
        return None
    scope: CacheScope = "public" if result.get("cacheScope") == "public" else "private"
    return CachePolicy(min(ttl, MAX_CACHE_TTL_MS), scope)


def new_entry(
    body: str, policy: CachePolicy, requested_at: float, received_at: float
) -> CacheEntry:
    """The entry for a result received at ``received_at`` (seconds) whose request
    went out at ``requested_at``: fresh for ``policy.ttl_ms`` after receipt."""
    return CacheEntry(body, policy.scope, requested_at, received_at + policy.ttl_ms / 1000)


def servable(
    entry: CacheEntry, key: CacheKey, now: float, invalidated_at: float = -math.inf
) -> bool:
    """Whether ``entry``, found under ``key``, may be served at ``now``: still fresh,
    requested after the last invalidation, and public if found in the shared partition."""
    if key.partition is None and entry.scope != "public":
        return False
    return now < entry.expires_at and entry.requested_at > invalidated_at


def invalidations(
    method: str, params: Mapping[str, Any] | None
) -> tuple[tuple[str, str | None], ...]:
    """What the server's notification ``method`` makes stale: ``(cached method,
    params key)`` pairs, the key ``None`` meaning every entry of that method."""
    if method in _LIST_CHANGED:
        return tuple((listed, None) for listed in _LIST_CHANGED[method])
    if method == RESOURCE_UPDATED:
        uri = (params or {}).get("uri")
        if isinstance(uri, str):
            return (("resources/read", cache_params({"uri": uri})),)
        return (("resources/read", None),)  # (a malformed update: stale, to be safe)
    return ()


__all__ = [
    "MAX_CACHE_TTL_MS",
    "RETRY_PARAMS",
    "CacheEntry",
    "CacheKey",
    "CachePolicy",
    "CacheScope",
    "cache_params",
    "invalidations",
    "is_retry",
    "lookup_keys",
    "new_entry",
    "partition_for",
    "request_cacheable",
    "result_policy",
    "servable",
    "store_key",
]
