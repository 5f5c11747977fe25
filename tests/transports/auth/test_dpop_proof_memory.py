"""``Dpop(seen_proofs=...)``: the memory of the proofs seen is the one given.

Two endpoints (two workers) given one memory accept a proof once between them; a
memory that cannot answer makes the request a 503 whose app never runs: the proof is
refused, never accepted unchecked.  Real sockets on 127.0.0.1, real JWTs and proofs."""

from __future__ import annotations

import pytest
from authserver_kit import AuthServerApp, Issuer, hosting
from mrtr_transports.auth import Dpop
from mrtr_transports.auth.proof_replay import ProofMemoryUnavailable, SeenProofs
from test_dpop_gate import Calls, Key, post, resource_auth, serve

pytestmark = pytest.mark.anyio


class DownMemory:
    """A shared memory whose store does not answer."""

    def __init__(self) -> None:
        self.claims = 0

    async def claim(self, digest: bytes, *, until: float, now: float) -> bool:
        self.claims += 1
        raise ProofMemoryUnavailable("the DPoP proof memory did not answer: refusing the proof")


async def test_endpoints_sharing_a_memory_accept_a_proof_once() -> None:
    issuer, key = Issuer(), Key()
    shared = SeenProofs(window=70, capacity=100)
    async with hosting(AuthServerApp(issuer)) as as_port:
        worker_a = resource_auth(as_port, Dpop(seen_proofs=shared))
        worker_b = resource_auth(as_port, Dpop(seen_proofs=shared))
        async with serve(worker_a) as port_a, serve(worker_b) as port_b:
            token = issuer.token("alice", cnf={"jkt": key.thumbprint})
            proof = key.proof(token)
            assert (await post(port_a, token, (proof,))).status == 200
            replayed = await post(port_b, token, (proof,))
            assert replayed.status == 401
            assert "used before" in replayed.json()["error"]["message"]
            assert (await post(port_b, token, (key.proof(token),))).status == 200
    assert len(shared) == 2


async def test_a_memory_that_cannot_answer_refuses_the_proof_with_503() -> None:
    issuer, key, down = Issuer(), Key(), DownMemory()
    async with hosting(AuthServerApp(issuer)) as as_port:
        auth = resource_auth(as_port, Dpop(seen_proofs=down))
        async with serve(auth) as port:
            token = issuer.token("alice", cnf={"jkt": key.thumbprint})
            before = Calls.count
            refused = await post(port, token, (key.proof(token),))
            assert refused.status == 503
            assert "did not answer" in refused.json()["error"]["message"]
            assert Calls.count == before  # the tool never ran
            # a bad proof is refused before the memory is asked
            assert (await post(port, token, (key.proof(token, htm="GET"),))).status == 401
    assert down.claims == 1
