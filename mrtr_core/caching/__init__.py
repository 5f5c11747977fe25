"""A client's response cache (``ttlMs`` / ``cacheScope``), for clients that keep one:
which requests may be cached, the policy a result declares, the keys an entry is
stored and looked up under, whether it may still be served, and what a
notification makes stale.  See ``docs/client.md``.
"""

from ._policy import (
    MAX_CACHE_TTL_MS,
    CacheEntry,
    CacheKey,
    CachePolicy,
    invalidations,
    lookup_keys,
    new_entry,
    request_cacheable,
    result_policy,
    servable,
    store_key,
)

__all__ = [
    "MAX_CACHE_TTL_MS",
    "CacheEntry",
    "CacheKey",
    "CachePolicy",
    "invalidations",
    "lookup_keys",
    "new_entry",
    "request_cacheable",
    "result_policy",
    "servable",
    "store_key",
]
