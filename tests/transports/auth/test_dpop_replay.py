"""The proofs a resource server remembers (``proof_replay.SeenProofs``) and ``Dpop``'s
settings: a proof is refused the second time within its window, forgotten after it,
and a full memory refuses new proofs rather than forgetting one still in its window
(503 at the endpoint, on a real socket)."""

from __future__ import annotations

import pytest
from authserver_kit import AuthServerApp, Issuer, hosting
from mrtr_transports.auth import Dpop
from mrtr_transports.auth.proof_replay import SeenProofs
from test_dpop_gate import Key, post, resource_auth, serve


def test_a_proof_is_seen_once_within_its_window() -> None:
    seen = SeenProofs(window=70, capacity=10)
    assert seen.first_use("key-a", "jti-1", now=1000) is True
    assert seen.first_use("key-a", "jti-1", now=1069) is False
    assert seen.first_use("key-b", "jti-1", now=1000) is True  # (another key's)
    assert len(seen) == 2
    # Past its window it is forgotten: its iat is too old to be accepted by then.
    assert seen.first_use("key-a", "jti-2", now=1070) is True
    assert len(seen) == 1
    assert seen.first_use("key-a", "jti-1", now=1070) is True


def test_a_full_memory_refuses_rather_than_forgets() -> None:
    seen = SeenProofs(window=60, capacity=2)
    assert seen.first_use("k", "1", now=0) is True
    assert seen.first_use("k", "2", now=1) is True
    assert seen.first_use("k", "3", now=2) is None
    assert seen.first_use("k", "1", now=2) is False  # (still remembered)
    assert seen.first_use("k", "3", now=60) is True  # "1" has left its window
    with pytest.raises(ValueError):
        SeenProofs(window=60, capacity=0)


@pytest.mark.parametrize(
    "options",
    [
        {"algorithms": ["HS256"]},
        {"algorithms": ["none"]},
        {"algorithms": []},
        {"max_age": 0},
        {"max_age": 3600},
        {"skew": -1},
    ],
)
def test_settings_out_of_bounds_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Dpop(**options)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_full_memory_is_503_at_the_endpoint() -> None:
    issuer, key = Issuer(), Key()
    async with hosting(AuthServerApp(issuer)) as as_port:
        auth = resource_auth(as_port, Dpop(max_proofs=1))
        async with serve(auth) as port:
            token = issuer.token("alice", cnf={"jkt": key.thumbprint})
            assert (await post(port, token, (key.proof(token),))).status == 200
            full = await post(port, token, (key.proof(token),))
            assert full.status == 503
            assert "too many recent DPoP proofs" in full.json()["error"]["message"]
