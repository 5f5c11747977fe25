"""``mrtr serve --http ... --auth-dpop --single-use redis://...``: two workers keep the
DPoP proofs they see in the one Redis, so a proof is good once across them.

Real processes on 127.0.0.1: two ``mrtr serve`` workers on one redis-server, tokens
signed by a test authorization server whose key set they fetch, proofs signed here.
A proof worker A accepted is refused by worker B (the replay); with Redis stopped a
fresh proof is refused with 503 (fail closed), never accepted, and the worker carries
on; a worker whose Redis cannot be reached at start warns, serves, and refuses
proofs with 503 likewise; the workers' logs hold no token and no proof.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from scale_cluster import Worker
from scale_services import RedisServer, free_port

# The authorization server and the proof signer of the DPoP tests (tests/transports/auth).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from authserver_kit import ISSUER, RESOURCE, AuthServerApp, Issuer, hosting
from mrtr_transports.cli import serve as serve_command
from mrtr_transports.stores.keys import new_state_keys
from test_dpop_gate import Key, call, post

import mrtr_core as m


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(new_state_keys())
    return path


@pytest.fixture
async def as_port() -> AsyncIterator[tuple[Issuer, int]]:
    issuer = Issuer()
    async with hosting(AuthServerApp(issuer)) as port:
        yield issuer, port


def dpop_worker(tmp_path: Path, keys: Path, redis_url: str, as_port: int) -> Worker:
    flags = ["--auth-issuer", ISSUER, "--auth-audience", RESOURCE, "--auth-dpop"]
    flags += ["--auth-jwks", f"http://127.0.0.1:{as_port}/jwks", "--log-level", "INFO"]
    return Worker(tmp_path, keys, redis_url, extra=flags)


@pytest.fixture
def workers(
    tmp_path: Path, keys_file: Path, redis_server: RedisServer, as_port: tuple[Issuer, int]
) -> Iterator[tuple[Worker, Worker]]:
    a = dpop_worker(tmp_path, keys_file, redis_server.url, as_port[1])
    b = dpop_worker(tmp_path, keys_file, redis_server.url, as_port[1])
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()
        for worker in (a, b):
            log = worker.log.read_text()
            assert "eyJ" not in log, log  # (every JWT, token or proof, starts eyJ)


def book_room() -> dict[str, Any]:
    """A first leg of ``book_room`` (it asks a form: the client says it can answer one)."""
    message = call("book_room")
    message["params"]["_meta"][m.wire.META_CLIENT_CAPABILITIES] = {"elicitation": {"form": {}}}
    return message


async def start(*workers: Worker) -> None:
    for worker in workers:
        worker.spawn()
    for worker in workers:  # (blocking waits: the authorization server serves meanwhile)
        await anyio.to_thread.run_sync(worker.wait_ready)


def test_help_says_where_the_proofs_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        serve_command.main(["--help"])
    assert exited.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "with --single-use in that Redis, shared by every worker" in shown


async def test_a_proof_accepted_by_one_worker_is_refused_by_the_other(
    workers: tuple[Worker, Worker], as_port: tuple[Issuer, int]
) -> None:
    a, b = workers
    await start(a, b)
    issuer, key = as_port[0], Key()
    token = issuer.token("alice", cnf={"jkt": key.thumbprint})
    proof = key.proof(token)
    message = book_room()
    accepted = await post(a.port, token, (proof,), message=message)
    assert accepted.status == 200, accepted.body
    replayed = await post(b.port, token, (proof,), message=message)
    assert replayed.status == 401
    assert "used before" in replayed.json()["error"]["message"]
    assert 'error="invalid_dpop_proof"' in (replayed.header("www-authenticate") or "")
    # and to the worker that accepted it, as before
    assert (await post(a.port, token, (proof,), message=message)).status == 401
    # a fresh proof is good at either
    assert (await post(b.port, token, (key.proof(token),), message=message)).status == 200


async def test_with_redis_stopped_a_proof_is_refused_not_accepted(
    workers: tuple[Worker, Worker], as_port: tuple[Issuer, int], redis_server: RedisServer
) -> None:
    a, b = workers
    await start(a, b)
    issuer, key = as_port[0], Key()
    token = issuer.token("alice", cnf={"jkt": key.thumbprint})
    message = book_room()
    assert (await post(a.port, token, (key.proof(token),), message=message)).status == 200
    redis_server.kill()
    for worker in (a, b):
        refused = await post(worker.port, token, (key.proof(token),), message=message)
        assert refused.status == 503, refused.body
        error = refused.json()["error"]["message"]
        assert "did not answer" in error and "127.0.0.1" not in error
        assert worker.alive
    assert "DPoP proof not checked" in a.log.read_text()


async def test_a_worker_whose_redis_is_unreachable_warns_and_refuses_proofs(
    tmp_path: Path, keys_file: Path, services: dict[str, str], as_port: tuple[Issuer, int]
) -> None:
    worker = dpop_worker(tmp_path, keys_file, f"redis://127.0.0.1:{free_port()}/0", as_port[1])
    try:
        await start(worker)
        assert "--single-use redis://127.0.0.1:" in worker.log.read_text()
        assert "(DPoP proofs)" in worker.log.read_text()
        issuer, key = as_port[0], Key()
        token = issuer.token("alice", cnf={"jkt": key.thumbprint})
        refused = await post(worker.port, token, (key.proof(token),), message=book_room())
        assert refused.status == 503, refused.body
        assert worker.alive
    finally:
        worker.stop()
