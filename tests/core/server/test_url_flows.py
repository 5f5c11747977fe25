"""The sans-IO parts of URL elicitation through a provider: URLs, callbacks, interactions."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlsplit

import pytest

import mrtr_core as m
from mrtr_core.server import (
    BadCallback,
    Interaction,
    InteractionGone,
    InteractionStatus,
    InteractionStoreFull,
    MemoryInteractions,
    begin_interaction,
    read_callback,
)
from mrtr_core.server._url_flows import (
    INTERACTION_TRANSITIONS,
    InteractionEvent,
    new_prefix,
    rewrite_provider_url,
    split_state,
)

CALLBACK = "http://127.0.0.1:8000/mcp/auth/callback"
PROVIDER = (
    "https://provider.test/authorize?client_id=abc&state=theirs&redirect_uri=https%3A%2F%2Fold"
)


def query_of(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query, keep_blank_values=True)


# --- the URL ------------------------------------------------------------------------------


def test_prefixes_are_fresh_and_url_safe() -> None:
    prefixes = {new_prefix() for _ in range(100)}
    assert len(prefixes) == 100
    assert all(len(p) == 32 and "." not in p for p in prefixes)


def test_the_url_carries_the_prefix_and_the_callback_and_keeps_the_rest() -> None:
    prefix = new_prefix()
    url, original = rewrite_provider_url(PROVIDER + "#frag", prefix=prefix, callback_url=CALLBACK)
    assert original == "theirs"
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path, parts.fragment) == (
        "https",
        "provider.test",
        "/authorize",
        "frag",
    )
    assert parse_qsl(parts.query) == [
        ("client_id", "abc"),
        ("redirect_uri", CALLBACK),
        ("state", f"{prefix}.theirs"),
    ]
    assert split_state(query_of(url)["state"][0]) == (prefix, "theirs")


def test_a_url_without_state_gets_the_prefix_alone() -> None:
    prefix = new_prefix()
    url, original = rewrite_provider_url(
        "https://provider.test/go", prefix=prefix, callback_url=CALLBACK
    )
    assert original is None
    assert query_of(url) == {"redirect_uri": [CALLBACK], "state": [prefix]}
    assert split_state(prefix) == (prefix, None)


def test_an_empty_provider_state_is_kept_empty() -> None:
    url, original = rewrite_provider_url(
        "https://provider.test/go?state=", prefix=new_prefix(), callback_url=CALLBACK
    )
    assert original == ""
    assert split_state(query_of(url)["state"][0])[1] == ""


@pytest.mark.parametrize(
    ("url", "callback", "prefix", "match"),
    [
        ("javascript:alert(1)", CALLBACK, None, "https"),
        ("https://provider.test/", "/relative", None, "callback URL"),
        ("https://provider.test/", CALLBACK, "short", "prefix"),
        ("https://provider.test/?state=a&state=b", CALLBACK, None, "2 'state'"),
        ("https://p.test/?redirect_uri=a&redirect_uri=b", CALLBACK, None, "2 'redirect_uri'"),
        ("https://provider.test/?state=" + "x" * 1025, CALLBACK, None, "longer"),
    ],
)
def test_urls_that_cannot_be_rewritten_are_refused(
    url: str, callback: str, prefix: str | None, match: str
) -> None:
    with pytest.raises(m.LocalProtocolError, match=match):
        rewrite_provider_url(url, prefix=prefix or new_prefix(), callback_url=callback)


@pytest.mark.parametrize("state", ["", "short.x", "a" * 31 + "!", "x" * 33])
def test_a_state_without_our_prefix_is_unknown(state: str) -> None:
    with pytest.raises(InteractionGone) as caught:
        split_state(state)
    assert caught.value.data == {"reason": "unknown"}


# --- the callback -------------------------------------------------------------------------


def test_a_code_completes() -> None:
    prefix = new_prefix()
    callback = read_callback(f"code=c0de&state={prefix}.theirs&iss=https%3A%2F%2Fp")
    assert callback.prefix == prefix
    assert callback.provider_state == "theirs"
    assert callback.event is InteractionEvent.CODE
    assert callback.params == {"code": "c0de", "iss": "https://p"}
    assert callback.error is None


def test_access_denied_declines_and_another_error_fails() -> None:
    prefix = new_prefix()
    denied = read_callback(f"error=access_denied&state={prefix}".encode())
    assert (denied.event, denied.error) == (InteractionEvent.DENIED, "access_denied")
    failed = read_callback(f"error=server_error&error_description=x&state={prefix}")
    assert (failed.event, failed.error) == (InteractionEvent.ERROR, "server_error")


@pytest.mark.parametrize(
    ("query", "match"),
    [
        (b"code=1", "no state"),
        ("code=1&state=" + "a" * 32 + "&state=" + "b" * 32, "twice"),
        ("state=" + "a" * 32, "neither"),
        ("state=" + "a" * 32 + "&code=%FF", "UTF-8"),
        (("state=" + "a" * 32 + "&code=é").encode("utf-8"), "ASCII"),
        ("code=" + "x" * m.server._url_flows.MAX_CALLBACK_QUERY, "longer"),
    ],
)
def test_what_no_provider_sends_is_a_bad_callback(query: Any, match: str) -> None:
    with pytest.raises(BadCallback, match=match) as caught:
        read_callback(query)
    assert caught.value.code == m.ErrorCode.INVALID_REQUEST


# --- the interaction ----------------------------------------------------------------------


def begun(now: float = 100.0, ttl: float = 60.0) -> tuple[Interaction, str]:
    return begin_interaction(
        PROVIDER, key="login", callback_url=CALLBACK, flow="F", principal="p", now=now, ttl=ttl
    )


def callback_for(interaction: Interaction, query: str = "code=c") -> m.server.Callback:
    return read_callback(f"{query}&state={interaction.id}.theirs")


def test_begin_registers_nothing_and_returns_the_url_to_ask() -> None:
    interaction, url = begun()
    assert interaction.status is InteractionStatus.PENDING
    assert (interaction.key, interaction.flow, interaction.principal) == ("login", "F", "p")
    assert (interaction.created_at, interaction.expires_at) == (100.0, 160.0)
    assert interaction.provider_state == "theirs"
    assert query_of(url)["state"] == [f"{interaction.id}.theirs"]


@pytest.mark.parametrize("ttl", [0, -5.0])
def test_a_ttl_must_be_positive(ttl: float) -> None:
    with pytest.raises(m.LocalProtocolError, match="ttl"):
        begun(ttl=ttl)


@pytest.mark.parametrize(
    ("query", "status", "error"),
    [
        ("code=c", InteractionStatus.COMPLETED, None),
        ("error=access_denied", InteractionStatus.DECLINED, "access_denied"),
        ("error=temporarily_unavailable", InteractionStatus.FAILED, "temporarily_unavailable"),
    ],
)
def test_a_callback_settles_a_pending_interaction_once(
    query: str, status: InteractionStatus, error: str | None
) -> None:
    interaction, _ = begun()
    settled = interaction.settle(callback_for(interaction, query), 110.0)
    assert (settled.status, settled.error) == (status, error)
    assert "state" not in settled.params
    with pytest.raises(InteractionGone) as gone:
        settled.settle(callback_for(interaction), 111.0)
    assert gone.value.reason == status.value


def test_time_expires_a_pending_interaction_and_nothing_settles_it_then() -> None:
    interaction, _ = begun()
    assert interaction.status_at(159.9) is InteractionStatus.PENDING
    assert interaction.status_at(160.0) is InteractionStatus.EXPIRED
    with pytest.raises(InteractionGone, match="expired"):
        interaction.settle(callback_for(interaction), 160.0)
    settled = interaction.settle(callback_for(interaction), 150.0)
    assert settled.status_at(1e9) is InteractionStatus.COMPLETED  # settled stays settled


def test_the_transition_table_leaves_no_settled_status() -> None:
    assert {before for before, _ in INTERACTION_TRANSITIONS} == {InteractionStatus.PENDING}
    assert set(INTERACTION_TRANSITIONS.values()) == set(InteractionStatus) - {
        InteractionStatus.PENDING
    }


def test_an_interaction_round_trips_as_json() -> None:
    interaction, _ = begun()
    settled = interaction.settle(callback_for(interaction), 120.0)
    for value in (interaction, settled):
        assert Interaction.from_json(value.to_json()) == value


# --- the table ----------------------------------------------------------------------------


def test_the_table_finds_settles_and_forgets() -> None:
    table = MemoryInteractions(10)
    interaction, _ = begun()
    table.register(interaction, 100.0)
    assert table.get(interaction.id, 101.0) == interaction
    settled = table.settle(callback_for(interaction), 102.0)
    assert table.get(interaction.id, 103.0) == settled
    with pytest.raises(InteractionGone):  # a replayed callback
        table.settle(callback_for(interaction), 104.0)
    table.discard(interaction.id)
    table.discard(interaction.id)  # twice is fine
    assert table.get(interaction.id, 105.0) is None
    with pytest.raises(InteractionGone, match="unknown"):
        table.settle(callback_for(interaction), 106.0)


def test_an_expired_entry_is_gone() -> None:
    table = MemoryInteractions(10)
    interaction, _ = begun()
    table.register(interaction, 100.0)
    assert table.get(interaction.id, 160.0) is None
    assert len(table) == 0


def test_the_table_refuses_past_its_bound_after_dropping_expired_ones() -> None:
    table = MemoryInteractions(2)
    short, _ = begun(now=0.0, ttl=300.0)
    long_, _ = begun(now=0.0, ttl=10.0)
    table.register(short, 0.0)
    table.register(long_, 0.0)
    third, _ = begun(now=1.0)
    with pytest.raises(InteractionStoreFull) as full:
        table.register(third, 1.0)
    assert full.value.code == m.ErrorCode.INTERNAL_ERROR
    # At 20 s the second (behind a live first one) has expired: a full sweep finds it.
    table.register(third, 20.0)
    assert len(table) == 2
    # At 400 s everything registered before has expired: dropped from the oldest.
    fourth, _ = begun(now=400.0)
    table.register(fourth, 400.0)
    assert len(table) == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3"])
def test_the_bound_is_a_positive_integer(bad: Any) -> None:
    with pytest.raises(m.LocalProtocolError):
        MemoryInteractions(bad)
