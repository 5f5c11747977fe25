"""The DPoP proof memory (``proof_replay.ProofMemory``) on both stores: the process's
``SeenProofs`` and ``RedisProofMemory`` on a real redis-server.

Both answer the one question the same way (first claim True, a replay False, another
proof True, a claim that ran out claimable again).  Redis's own: two memories on one
Redis (two workers) share what they saw, keys are the proof's digest under the
resource's namespace (never the jti), bounded and expiring; a Redis that is down or
does not answer refuses the claim (``ProofMemoryUnavailable``) and the memory works
again once it is back.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import coredis
import pytest
from mrtr_transports.auth.proof_replay import (
    ProofMemory,
    ProofMemoryUnavailable,
    ProofNotChecked,
    ProofsFull,
    SeenProofs,
    proof_digest,
)
from mrtr_transports.stores.redis_proofs import RedisProofMemory
from scale_services import RedisServer, free_port

import mrtr_core as m

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example.test/mcp"
WINDOW = 70.0


@pytest.fixture(params=["process", "redis"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ProofMemory]:
    if request.param == "process":
        yield SeenProofs(window=WINDOW, capacity=100)
        return
    redis: RedisServer = request.getfixturevalue("redis_server")
    async with RedisProofMemory(redis.url, resource=RESOURCE) as shared:
        yield shared


async def test_a_proof_is_claimed_once(memory: ProofMemory) -> None:
    now = time.time()
    one = proof_digest("key-a", "jti-1")
    assert await memory.claim(one, until=now + WINDOW, now=now) is True
    assert await memory.claim(one, until=now + WINDOW + 1, now=now + 1) is False
    # the same jti by another key, another jti by the same key: other proofs
    assert await memory.claim(proof_digest("key-b", "jti-1"), until=now + WINDOW, now=now)
    assert await memory.claim(proof_digest("key-a", "jti-2"), until=now + WINDOW, now=now)


async def test_a_claim_that_ran_out_is_claimable_again(memory: ProofMemory) -> None:
    now = time.time()
    digest = proof_digest("key-a", "short")
    # (Redis keeps the key clock_skew longer: a claim already over by more than that)
    until = now - 120
    assert await memory.claim(digest, until=until, now=now) is True
    assert await memory.claim(digest, until=now + WINDOW, now=now) is True


async def test_the_digest_is_of_the_key_and_the_jti() -> None:
    digest = proof_digest("key-a", "jti-1")
    assert digest == hashlib.sha256(b"key-a\x00jti-1").digest()
    assert len(proof_digest("k", "j" * 10_000)) == 32


async def test_the_process_memory_refuses_when_full_and_first_use_still_answers() -> None:
    seen = SeenProofs(window=60, capacity=1)
    assert await seen.claim(proof_digest("k", "1"), until=60, now=0) is True
    with pytest.raises(ProofsFull):
        await seen.claim(proof_digest("k", "2"), until=61, now=1)
    assert seen.first_use("k", "2", now=1) is None
    assert seen.first_use("k", "1", now=1) is False  # the same memory as claim's
    assert issubclass(ProofsFull, ProofNotChecked)
    assert issubclass(ProofMemoryUnavailable, ProofNotChecked)


async def test_workers_on_one_redis_share_the_proofs_seen(redis_server: RedisServer) -> None:
    now = time.time()
    digest = proof_digest("key-a", "jti-1")
    async with (
        RedisProofMemory(redis_server.url, resource=RESOURCE) as a,
        RedisProofMemory(redis_server.url, resource=RESOURCE) as b,
    ):
        assert await a.claim(digest, until=now + WINDOW, now=now) is True
        assert await b.claim(digest, until=now + WINDOW, now=now) is False


async def test_concurrent_claims_of_one_proof_give_one_true(redis_server: RedisServer) -> None:
    now = time.time()
    digest = proof_digest("key-a", "raced")
    answers: list[bool] = []
    async with (
        RedisProofMemory(redis_server.url, resource=RESOURCE) as a,
        RedisProofMemory(redis_server.url, resource=RESOURCE) as b,
    ):

        async def claim(memory: RedisProofMemory) -> None:
            answers.append(await memory.claim(digest, until=now + WINDOW, now=now))

        async with anyio.create_task_group() as tasks:
            for _ in range(10):
                tasks.start_soon(claim, a)
                tasks.start_soon(claim, b)
    assert sorted(answers) == [False] * 19 + [True]


async def test_keys_are_digests_namespaced_per_resource_and_expire(
    redis_server: RedisServer,
) -> None:
    jti = "the-raw-jti-value"
    now = time.time()
    digest = proof_digest("key-a", jti)
    other = "https://other.example.test/mcp"
    async with (
        RedisProofMemory(redis_server.url, resource=RESOURCE) as mine,
        RedisProofMemory(redis_server.url, resource=other) as theirs,
        coredis.Redis.from_url(redis_server.url, decode_responses=True) as raw,
    ):
        assert await mine.claim(digest, until=now + WINDOW, now=now) is True
        # another resource on the same Redis keeps its own proofs
        assert await theirs.claim(digest, until=now + WINDOW, now=now) is True
        keys = sorted(await raw.keys("*"))
        namespace = hashlib.sha256(RESOURCE.encode()).hexdigest()[:16]
        assert f"mrtr:dpop:{namespace}:{digest.hex()}" in keys
        assert len(keys) == 2 and all(jti not in key for key in keys)
        assert all(len(key) <= 64 + 17 + 64 for key in keys)
        left_ms = await raw.pttl(mine.key_of(digest))
        # until + clock_skew (60 s), by Redis's clock
        assert (WINDOW + 60 - 5) * 1000 < left_ms <= (WINDOW + 60) * 1000


async def test_a_stopped_redis_refuses_claims_and_a_restarted_one_serves_again(
    services: dict[str, str], tmp_path: Path
) -> None:
    redis = RedisServer(services["redis-server"], tmp_path).start()
    try:
        async with RedisProofMemory(redis.url, resource=RESOURCE, timeout=1.0) as memory:
            now = time.time()
            assert await memory.claim(proof_digest("k", "1"), until=now + WINDOW, now=now)
            redis.kill()
            with pytest.raises(ProofMemoryUnavailable) as refused:
                await memory.claim(proof_digest("k", "2"), until=now + WINDOW, now=now)
            assert "127.0.0.1" not in str(refused.value)  # (no infrastructure in the message)
            assert "fail closed" in str(refused.value)
            redis = RedisServer(services["redis-server"], tmp_path, port=redis.port).start()
            now = time.time()
            assert await memory.claim(proof_digest("k", "2"), until=now + WINDOW, now=now)
    finally:
        redis.stop()


async def test_a_redis_that_does_not_answer_refuses_within_the_timeout(
    redis_server: RedisServer,
) -> None:
    async with RedisProofMemory(redis_server.url, resource=RESOURCE, timeout=0.5) as memory:
        await memory.check()
        redis_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(ProofMemoryUnavailable):
                now = time.time()
                await memory.claim(proof_digest("k", "paused"), until=now + WINDOW, now=now)
            assert time.monotonic() - started < 3
        finally:
            redis_server.resume()


async def test_nothing_listening_refuses_the_claim() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    async with RedisProofMemory(url, resource=RESOURCE, timeout=1.0) as memory:
        with pytest.raises(ProofMemoryUnavailable):
            await memory.check()
        with pytest.raises(ProofMemoryUnavailable):
            await memory.claim(proof_digest("k", "1"), until=time.time() + WINDOW, now=0)


async def test_misuse_is_a_local_protocol_error(redis_server: RedisServer) -> None:
    memory = RedisProofMemory(redis_server.url, resource=RESOURCE)
    with pytest.raises(m.LocalProtocolError):
        await memory.claim(proof_digest("k", "1"), until=time.time() + WINDOW, now=0)
    async with memory:
        with pytest.raises(m.LocalProtocolError):
            await memory.claim(b"raw jti, not a digest", until=time.time() + WINDOW, now=0)


@pytest.mark.parametrize(
    "options",
    [
        {"url": "http://127.0.0.1:6379/0"},
        {"prefix": ""},
        {"prefix": "x" * 65},
        {"prefix": "spaces are not keys"},
        {"resource": ""},
        {"timeout": 0},
        {"clock_skew": -1},
        {"max_connections": 0},
    ],
)
def test_settings_out_of_bounds_are_refused(options: dict[str, object]) -> None:
    arguments: dict[str, object] = {"url": "redis://127.0.0.1:6379/0", "resource": RESOURCE}
    with pytest.raises(ValueError):
        RedisProofMemory(**(arguments | options))  # type: ignore[arg-type]


def test_the_repr_hides_the_password() -> None:
    memory = RedisProofMemory("redis://:s3cret@127.0.0.1:6379/0", resource=RESOURCE)
    assert "s3cret" not in repr(memory) and "***" in repr(memory)
