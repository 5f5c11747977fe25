"""A DPoP-bound token is kept with its key (RFC 9449): the stores' round trip (the private
key as a JWK in the token's own entry of the 0600 file; beside the token in memory), the
key never in a repr, ``entries()`` or an error, dropped with its token; and the provider
of a later process (a new ``OAuthProvider`` on the same file) proving and refreshing with
the stored key, against ``test_oauth_dpop``'s scripted authorization server that checks
each proof.  A bound token whose key is missing or unreadable is no token: a new
authorization, never the token sent as Bearer."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import jwt
import pytest
from mrtr_transports.client.oauth import FileTokenStore, MemoryTokenStore
from mrtr_transports.client.oauth.dpop import DpopKey
from test_oauth_dpop import dpop_server, proofs, verify_proof
from test_oauth_provider import challenge, provider, serving

from mrtr_core.auth import Tokens

pytestmark = pytest.mark.anyio

RESOURCE, ISSUER = "https://mcp.example/mcp", "https://as.example"
BOUND = Tokens(access_token="bound-token", token_type="DPoP", refresh_token="bound-refresh")
PLAIN = Tokens(access_token="plain-token", refresh_token="plain-refresh")


def public_of(proof: str) -> dict[str, Any]:
    jwk: dict[str, Any] = jwt.get_unverified_header(proof)["jwk"]
    return jwk


# --- The key ------------------------------------------------------------------------


def test_a_key_read_back_from_its_private_jwk_is_the_same_key() -> None:
    key = DpopKey()
    private = key.private_jwk()
    assert private["kty"] == "EC" and private["crv"] == "P-256" and private["d"]
    again = DpopKey.from_private_jwk(json.loads(json.dumps(private)))
    assert again.public_jwk == key.public_jwk
    proof = again.proof("POST", "https://mcp.example/mcp", now=1_700_000_000.0)
    assert public_of(proof) == key.public_jwk
    verify_proof(proof, "POST", "https://mcp.example/mcp")  # signed by that key
    assert private["d"] not in repr(again) and "d" not in again.public_jwk


@pytest.mark.parametrize(
    "jwk",
    [
        {},
        {"kty": "RSA", "n": "AQAB", "e": "AQAB", "d": "secret-d-value"},
        {"kty": "EC", "crv": "P-384", "x": "AA", "y": "AA", "d": "secret-d-value"},
        {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA", "d": "secret-d-value"},
        "public only",
    ],
)
def test_what_is_no_private_p256_jwk_is_refused_without_quoting_it(jwk: Any) -> None:
    if jwk == "public only":
        jwk = DpopKey().public_jwk
    with pytest.raises(ValueError) as refused:
        DpopKey.from_private_jwk(jwk)
    assert str(refused.value) == "not an EC P-256 private JWK"
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


# --- The stores -----------------------------------------------------------------------


async def test_the_file_keeps_a_bound_token_with_its_key_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "mrtr" / "tokens.json"
    key = DpopKey()
    await FileTokenStore(path).save_tokens(RESOURCE, ISSUER, BOUND, dpop_key=key)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [entry] = json.loads(path.read_text())["tokens"].values()
    assert entry["dpop_key"] == key.private_jwk()  # in the token's own entry
    later = FileTokenStore(path)  # (a later process)
    assert await later.tokens(RESOURCE, ISSUER) == BOUND
    stored = await later.dpop_key(RESOURCE, ISSUER)
    assert stored is not None and stored.public_jwk == key.public_jwk
    secret = key.private_jwk()["d"]
    shown = [repr(later), repr(later.entries()), repr(stored), str(later.entries())]
    assert all(secret not in text for text in shown)
    assert later.entries().tokens == {(RESOURCE, ISSUER): BOUND}


async def test_a_token_saved_again_without_a_key_loses_the_old_one(tmp_path: Path) -> None:
    for store in (FileTokenStore(tmp_path / "tokens.json"), MemoryTokenStore()):
        await store.save_tokens(RESOURCE, ISSUER, BOUND, dpop_key=DpopKey())
        await store.save_tokens(RESOURCE, ISSUER, PLAIN)
        assert await store.dpop_key(RESOURCE, ISSUER) is None
        await store.save_tokens(RESOURCE, ISSUER, BOUND, dpop_key=DpopKey())
        await store.save_tokens(RESOURCE, ISSUER, None)
        assert await store.dpop_key(RESOURCE, ISSUER) is None
        assert await store.tokens(RESOURCE, ISSUER) is None
    assert "dpop_key" not in (tmp_path / "tokens.json").read_text()


async def test_memory_keeps_the_key_object_beside_the_token() -> None:
    store, key = MemoryTokenStore(), DpopKey()
    await store.save_tokens(RESOURCE, ISSUER, BOUND, dpop_key=key)
    assert await store.dpop_key(RESOURCE, ISSUER) is key
    assert await store.dpop_key(RESOURCE, "https://other.example") is None
    assert key.private_jwk()["d"] not in repr(store) + repr(store.entries())


async def test_forget_and_clear_drop_the_key_with_its_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    file, memory = FileTokenStore(path), MemoryTokenStore()
    for store in (file, memory):
        await store.save_tokens(RESOURCE, ISSUER, BOUND, dpop_key=DpopKey())
        await store.save_tokens("https://kept.example/mcp", ISSUER, BOUND, dpop_key=DpopKey())
        assert store.forget(lambda resource, _: resource == RESOURCE) == 1
        assert await store.dpop_key(RESOURCE, ISSUER) is None
        assert await store.dpop_key("https://kept.example/mcp", ISSUER) is not None
    assert path.read_text().count('"d"') == 1  # the kept token's key alone
    for store in (file, memory):
        store.clear()
        assert await store.dpop_key("https://kept.example/mcp", ISSUER) is None
    assert '"d"' not in path.read_text()


@pytest.mark.parametrize("damage", ["missing", "not a JWK", "public only", "wrong d"])
async def test_a_key_the_file_cannot_give_back_is_none(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "tokens.json"
    key = DpopKey()
    await FileTokenStore(path).save_tokens(RESOURCE, ISSUER, BOUND, dpop_key=key)
    raw = json.loads(path.read_text())
    [entry] = raw["tokens"].values()
    if damage == "missing":
        del entry["dpop_key"]
    elif damage == "not a JWK":
        entry["dpop_key"] = "-----BEGIN EC PRIVATE KEY-----"
    elif damage == "public only":
        entry["dpop_key"] = key.public_jwk
    else:  # (a private value that is not the key of that public point)
        entry["dpop_key"]["d"] = DpopKey().private_jwk()["d"]
    path.write_text(json.dumps(raw))
    store = FileTokenStore(path)
    assert await store.dpop_key(RESOURCE, ISSUER) is None
    assert await store.tokens(RESOURCE, ISSUER) == BOUND  # (the provider's rule: no token)


# --- A later process's provider --------------------------------------------------------


async def test_a_later_provider_proves_and_refreshes_with_the_stored_key(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    async with serving(dpop_server()) as server:
        first = provider(server, dpop=True, store=FileTokenStore(path))
        assert await first.challenged(401, challenge(server), None)
        [signed_in] = proofs(server)
        bound_to = public_of(signed_in)

        # The next process: a new provider (a new key of its own) on the same file.
        later = provider(server, dpop=True, store=FileTokenStore(path))
        assert await later.challenged(401, challenge(server), None)
        assert later.authorizations == 0  # the stored token, no sign-in
        sent = await later.authorization()
        assert sent == ("Authorization", "DPoP bound-1")
        resource = f"{server.base}/mcp"
        ((_, proof),) = later.proof_headers("POST", resource, sent)
        assert public_of(proof) == bound_to
        verify_proof(proof, "POST", resource)

        # Expired: the refresh proves the same key, and the new token keeps it.
        raw = json.loads(path.read_text())
        [entry] = raw["tokens"].values()
        entry["expires_at"] = 1.0
        path.write_text(json.dumps(raw))
        third = provider(server, dpop=True, store=FileTokenStore(path))
        assert await third.challenged(401, challenge(server), None)
        assert await third.authorization() == ("Authorization", "DPoP bound-2")
        refresh = [s for s in server.seen if s.path == "/token"][-1]
        assert refresh.form()["grant_type"] == "refresh_token"
        assert public_of(refresh.headers["dpop"]) == bound_to
        assert third.authorizations == 0
        [stored_as] = FileTokenStore(path).entries().tokens
        kept = await FileTokenStore(path).dpop_key(*stored_as)
        assert kept is not None and kept.public_jwk == bound_to


@pytest.mark.parametrize("damage", ["missing", "unreadable"])
async def test_a_bound_token_without_its_key_is_no_token(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "tokens.json"
    async with serving(dpop_server()) as server:
        first = provider(server, dpop=True, store=FileTokenStore(path))
        assert await first.challenged(401, challenge(server), None)
        raw = json.loads(path.read_text())
        [entry] = raw["tokens"].values()
        if damage == "missing":
            del entry["dpop_key"]
        else:
            entry["dpop_key"] = {"kty": "EC", "crv": "P-256", "d": "?"}
        path.write_text(json.dumps(raw))

        for dpop in (True, False):  # (never sent as Bearer, whichever the provider asks)
            later = provider(server, dpop=dpop, store=FileTokenStore(path))
            assert await later.authorization() is None  # (nothing discovered yet)
            assert await later.challenged(401, challenge(server), None)
            assert later.authorizations == 1  # signed in again
            sent = await later.authorization()
            assert sent is not None and sent[1] != "Bearer bound-1"
            assert sent != ("Authorization", "DPoP bound-1")
            raw = json.loads(path.read_text())
            [entry] = raw["tokens"].values()
            entry.pop("dpop_key", None)  # (the next round starts keyless again)
            path.write_text(json.dumps(raw))


async def test_memory_store_shared_by_two_providers_shares_the_key() -> None:
    store = MemoryTokenStore()
    async with serving(dpop_server()) as server:
        first = provider(server, dpop=True, store=store)
        assert await first.challenged(401, challenge(server), None)
        second = provider(server, dpop=True, store=store)
        assert await second.challenged(401, challenge(server), None)
        assert second.authorizations == 0
        sent = await second.authorization()
        assert sent == ("Authorization", "DPoP bound-1")
        ((_, proof),) = second.proof_headers("GET", f"{server.base}/mcp", sent)
        assert public_of(proof) == public_of(proofs(server)[0])
