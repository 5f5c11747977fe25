"""The one rule of every shared pool: a bound for all, a smaller share for each client."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mrtr_transports._shares import LOCAL_CLIENT, ClientShares, ShareRefusal, client_key


def _pool(total: int = 4, per_client: int = 2) -> ClientShares:
    return ClientShares(
        total,
        per_client,
        what="2025 sessions",
        total_setting="max_sessions",
        per_client_setting="max_sessions_per_client",
    )


def test_one_client_meets_its_own_share_long_before_the_pool_is_full() -> None:
    pool = _pool(total=4, per_client=2)
    assert pool.admit("peer:a") is None
    assert pool.admit("peer:a") is None
    refused = pool.admit("peer:a")
    assert refused == ShareRefusal(
        429,
        "this client already holds 2 2025 sessions (max_sessions_per_client=2): "
        "end one, or retry later",
    )
    assert refused.own_share
    assert (len(pool), pool.held_by("peer:a"), pool.clients()) == (2, 2, 1)
    # ... and everyone else still gets in.
    assert pool.admit("peer:b") is None


def test_a_full_pool_refuses_with_503_naming_the_total() -> None:
    pool = _pool(total=3, per_client=2)
    for client in ("a", "a", "b"):
        assert pool.admit(client) is None
    refused = pool.admit("c")
    assert refused is not None and refused.status == 503 and not refused.own_share
    assert "max_sessions=3" in refused.message
    assert pool.held_by("c") == 0 and len(pool) == 3


def test_a_release_frees_the_clients_place_and_an_unknown_release_does_nothing() -> None:
    pool = _pool(total=2, per_client=2)
    pool.admit("a")
    pool.admit("a")
    pool.release("nobody")
    assert len(pool) == 2
    pool.release("a")
    assert (len(pool), pool.held_by("a")) == (1, 1)
    pool.release("a")
    assert (len(pool), pool.clients()) == (0, 0)
    assert pool.refusal("a") is None


def test_a_share_larger_than_the_pool_is_the_pool_and_zero_is_refused() -> None:
    assert _pool(total=2, per_client=9).per_client == 2
    with pytest.raises(ValueError, match="max_sessions and max_sessions_per_client"):
        _pool(total=0, per_client=1)
    with pytest.raises(ValueError):
        _pool(total=1, per_client=0)


def test_the_key_is_the_principal_where_known_else_the_peer() -> None:
    assert client_key("alice", "10.0.0.1") == "principal:alice"
    assert client_key(None, "10.0.0.1") == "peer:10.0.0.1"
    assert client_key("", None) == "peer:unknown"
    # A principal can never pose as an address, nor the reverse.
    assert client_key("10.0.0.1", None) != client_key(None, "10.0.0.1")


@given(st.lists(st.tuples(st.booleans(), st.sampled_from("abc")), max_size=60))
def test_no_sequence_of_admits_and_releases_breaks_either_bound(
    steps: list[tuple[bool, str]],
) -> None:
    pool = _pool(total=4, per_client=2)
    for taking, client in steps:
        if taking:
            pool.admit(client)
        else:
            pool.release(client)
        assert len(pool) <= 4
        assert all(pool.held_by(c) <= 2 for c in "abc")
        assert len(pool) == sum(pool.held_by(c) for c in "abc")


def test_the_one_client_of_a_stdio_server_has_the_whole_pool() -> None:
    # (A benchmark's one stdio client met a share of 5,000 single-use entries: -32000.)
    pool = _pool(total=4, per_client=2)
    for _ in range(4):
        assert pool.admit(LOCAL_CLIENT) is None
    refused = pool.admit(LOCAL_CLIENT)
    assert refused is not None and refused.status == 503  # the pool's bound still holds
