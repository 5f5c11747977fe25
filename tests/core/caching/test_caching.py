"""The client-side caching rules (mrtr_core.caching._policy), sans-IO."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrtr_core as m
from mrtr_core.caching import (
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
from mrtr_core.caching._policy import cache_params, is_retry, partition_for

LISTS = ["tools/list", "prompts/list", "resources/list", "resources/templates/list"]


def test_every_cacheable_method_is_cacheable_and_nothing_else() -> None:
    for method in [*LISTS, "server/discover", "resources/read"]:
        assert request_cacheable(method, None)
    for method in ["tools/call", "prompts/get", "subscriptions/listen", "completion/complete"]:
        assert not request_cacheable(method, None)


@pytest.mark.parametrize("field", ["inputResponses", "requestState"])
def test_an_mrtr_retry_is_never_cacheable(field: str) -> None:
    params = {"uri": "test://x", field: {} if field == "inputResponses" else "s"}
    assert is_retry(params)
    assert not request_cacheable("resources/read", params)
    result = {"resultType": "complete", "ttlMs": 1000, "cacheScope": "public"}
    assert result_policy("resources/read", params, result) is None
    assert not is_retry(None) and not is_retry({"uri": "test://x"})


def test_policy_of_a_complete_result() -> None:
    result = {"tools": [], "ttlMs": 1500, "cacheScope": "public"}
    assert result_policy("tools/list", None, result) == CachePolicy(1500, "public")
    # A missing resultType is "complete" (older servers); a missing or unknown
    # scope is private, the safe reading.
    assert result_policy("tools/list", None, {"ttlMs": 10}) == CachePolicy(10, "private")
    odd = {"ttlMs": 10, "cacheScope": "everyone"}
    assert result_policy("tools/list", None, odd) == CachePolicy(10, "private")
    assert result_policy("tools/list", None, {"ttlMs": 2.5}) == CachePolicy(2.5, "private")


@pytest.mark.parametrize(
    "result",
    [
        {"tools": []},  # no ttlMs: immediately stale
        {"ttlMs": 0},
        {"ttlMs": -5},
        {"ttlMs": True},
        {"ttlMs": "1000"},
        {"ttlMs": math.inf},
        {"ttlMs": math.nan},
        {"resultType": "input_required", "ttlMs": 1000, "requestState": "s"},
        {"resultType": "something-else", "ttlMs": 1000},
    ],
)
def test_results_that_are_not_stored(result: dict[str, Any]) -> None:
    assert result_policy("tools/list", None, result) is None


def test_not_stored_for_a_method_that_is_not_cacheable() -> None:
    assert result_policy("tools/call", {"name": "x"}, {"ttlMs": 1000}) is None


def test_ttl_is_capped() -> None:
    policy = result_policy("tools/list", None, {"ttlMs": 10 * MAX_CACHE_TTL_MS})
    assert policy is not None and policy.ttl_ms == MAX_CACHE_TTL_MS


def test_cache_params_ignore_meta_and_key_order() -> None:
    a = cache_params({"cursor": "c", "_meta": {"io.modelcontextprotocol/protocolVersion": "x"}})
    b = cache_params({"cursor": "c"})
    assert a == b == '{"cursor":"c"}'
    assert cache_params(None) == cache_params({}) == "{}"
    assert cache_params({"b": 1, "a": {"y": 2, "x": 1}}) == cache_params(
        {"a": {"x": 1, "y": 2}, "b": 1}
    )
    assert cache_params({"uri": "é"}) == '{"uri":"é"}'


@pytest.mark.parametrize("bad", [{"x": object()}, {"x": math.nan}])
def test_cache_params_refuse_what_json_cannot_carry(bad: dict[str, Any]) -> None:
    with pytest.raises(m.LocalProtocolError, match="cannot be a cache key"):
        cache_params(bad)


def test_partitions() -> None:
    assert partition_for("public", "alice") is None
    assert partition_for("private", "alice") == "alice"
    assert partition_for("private", None) == ""
    own, shared = lookup_keys("srv", "tools/list", None, "alice")
    assert own == CacheKey("srv", "alice", "tools/list", "{}")
    assert shared == CacheKey("srv", None, "tools/list", "{}")
    assert store_key("srv", "tools/list", None, "alice", "public") == shared
    assert store_key("srv", "tools/list", None, "alice", "private") == own
    # Two principals never share a private key; both share the public one.
    bob_own, bob_shared = lookup_keys("srv", "tools/list", None, "bob")
    assert bob_own != own and bob_shared == shared


def test_freshness() -> None:
    entry = new_entry("{}", CachePolicy(2000, "private"), requested_at=9.5, received_at=10.0)
    assert entry == CacheEntry("{}", "private", 9.5, 12.0)
    own = CacheKey("s", "", "tools/list", "{}")
    assert servable(entry, own, now=11.999)
    assert not servable(entry, own, now=12.0)  # now < received + ttl, strictly
    # An invalidation after the request went out makes it stale, even if the answer
    # came later; one before it does not.
    assert not servable(entry, own, now=11.0, invalidated_at=9.7)
    assert not servable(entry, own, now=11.0, invalidated_at=9.5)
    assert servable(entry, own, now=11.0, invalidated_at=9.4)


def test_a_private_entry_is_never_served_from_the_shared_partition() -> None:
    private = new_entry("{}", CachePolicy(2000, "private"), 0.0, 0.0)
    public = new_entry("{}", CachePolicy(2000, "public"), 0.0, 0.0)
    shared = CacheKey("s", None, "tools/list", "{}")
    assert not servable(private, shared, now=1.0)
    assert servable(public, shared, now=1.0)


def test_entry_size_counts_utf8_bytes() -> None:
    assert new_entry('"é"', CachePolicy(1, "public"), 0, 0).size == 4


def test_invalidations() -> None:
    assert invalidations("notifications/tools/list_changed", None) == (("tools/list", None),)
    assert invalidations("notifications/prompts/list_changed", {}) == (("prompts/list", None),)
    assert invalidations("notifications/resources/list_changed", None) == (
        ("resources/list", None),
        ("resources/templates/list", None),
    )
    assert invalidations("notifications/resources/updated", {"uri": "test://a"}) == (
        ("resources/read", cache_params({"uri": "test://a"})),
    )
    assert invalidations("notifications/resources/updated", None) == (("resources/read", None),)
    assert invalidations("notifications/message", {"level": "info"}) == ()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_cache_params_is_canonical(params: dict[str, Any]) -> None:
    reordered = dict(reversed(list(params.items())))
    assert cache_params(params) == cache_params(reordered)
    with_meta = {**params, "_meta": {"k": 1}}
    assert cache_params(with_meta) == cache_params(
        {k: v for k, v in params.items() if k != "_meta"}
    )


@given(
    ttl=st.floats(min_value=0.001, max_value=1e9),
    received=st.floats(min_value=-1e6, max_value=1e6),
    later=st.floats(min_value=0, max_value=1e6),
)
def test_fresh_exactly_until_the_ttl(ttl: float, received: float, later: float) -> None:
    policy = result_policy("tools/list", None, {"ttlMs": ttl, "cacheScope": "public"})
    assert policy is not None
    entry = new_entry("{}", policy, received, received)
    key = CacheKey("s", None, "tools/list", "{}")
    now = received + later
    assert servable(entry, key, now) == (now < received + min(ttl, MAX_CACHE_TTL_MS) / 1000)
