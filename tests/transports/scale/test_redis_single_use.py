"""``RedisSingleUse`` against a real redis-server (no persistence, a free 127.0.0.1 port).

One nonce, spent concurrently from many trio tasks and from two processes, is
spent exactly once; spent nonces expire with their token (plus the clock-skew
margin); a server that is gone, or that does not answer, fails the spend closed
(``SingleUseStoreUnavailable``, a ``NonceStoreFull``) and the store recovers
when the server is back.
"""

from __future__ import annotations

import json
import sys
import textwrap
import time

import coredis
import pytest
import trio
from mrtr_transports.stores.redis import (
    DEFAULT_PREFIX,
    RedisSingleUse,
    SingleUseStoreUnavailable,
    redacted,
)
from scale_services import RedisServer

import mrtr_core as m


def later(seconds: float = 600.0) -> float:
    return time.time() + seconds


async def test_first_spend_is_true_and_every_later_one_false(redis_server: RedisServer) -> None:
    async with RedisSingleUse(redis_server.url) as store:
        assert await store.consume("n-1", later(), time.time()) is True
        assert await store.consume("n-1", later(), time.time()) is False
        assert await store.consume("n-1", later(), time.time()) is False
        assert await store.consume("n-2", later(), time.time()) is True
        await store.check()


async def test_the_key_is_the_prefix_and_the_nonce(redis_server: RedisServer) -> None:
    async with (
        RedisSingleUse(redis_server.url) as one,
        RedisSingleUse(redis_server.url, prefix="other:") as other,
    ):
        assert await one.consume("shared", later(), time.time()) is True
        assert await other.consume("shared", later(), time.time()) is True  # its own keys
        async with coredis.Redis.from_url(redis_server.url) as raw:
            assert await raw.get(DEFAULT_PREFIX + "shared") == b"1"
            assert await raw.get("other:shared") == b"1"


async def test_fifty_concurrent_spends_from_trio_tasks_give_one_true(
    redis_server: RedisServer,
) -> None:
    # three stores (three connection pools, as three apps would have) share the 50 spends
    results: list[bool] = []
    async with (
        RedisSingleUse(redis_server.url, max_connections=4) as a,
        RedisSingleUse(redis_server.url) as b,
        RedisSingleUse(redis_server.url) as c,
    ):
        stores = [a, b, c]
        start = trio.Event()

        async def spend(i: int) -> None:
            await start.wait()
            results.append(await stores[i % 3].consume("contested", later(), time.time()))

        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(spend, i)
            await trio.sleep(0.05)
            start.set()
    assert len(results) == 50
    assert results.count(True) == 1


SPENDER = textwrap.dedent(
    """
    import sys, time, trio
    from mrtr_transports.stores.redis import RedisSingleUse

    url, nonce, at = sys.argv[1], sys.argv[2], float(sys.argv[3])

    async def main():
        results = []
        async with RedisSingleUse(url) as store:
            await store.check()  # connected before the common start
            async def spend():
                results.append(await store.consume(nonce, time.time() + 600, time.time()))
            await trio.sleep(max(0.0, at - time.time()))
            async with trio.open_nursery() as nursery:
                for _ in range(25):
                    nursery.start_soon(spend)
        print(sum(results), len(results))

    trio.run(main)
    """
)


async def test_fifty_concurrent_spends_from_two_processes_give_one_true(
    redis_server: RedisServer,
) -> None:
    start_at = time.time() + 4.0  # both processes imported and connected by then
    argv = [sys.executable, "-c", SPENDER, redis_server.url, "cross-process", str(start_at)]
    outputs: list[str] = []

    async def run() -> None:
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        assert done.returncode == 0, done.stderr.decode()
        outputs.append(done.stdout.decode())

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            nursery.start_soon(run)
    counts = [tuple(map(int, out.split())) for out in outputs]
    assert sorted(total for _, total in counts) == [25, 25]
    assert sum(trues for trues, _ in counts) == 1


async def test_a_spent_nonce_expires_with_its_token(redis_server: RedisServer) -> None:
    async with RedisSingleUse(redis_server.url, clock_skew=0) as store:
        assert await store.consume("short", time.time() + 0.4, time.time()) is True
        assert await store.consume("short", time.time() + 0.4, time.time()) is False
        await trio.sleep(1.0)  # Redis dropped the key at expires_at
        assert await store.consume("short", time.time() + 0.4, time.time()) is True


async def test_a_spent_nonce_is_kept_clock_skew_longer(redis_server: RedisServer) -> None:
    async with RedisSingleUse(redis_server.url, clock_skew=30) as store:
        expires_at = time.time() + 10
        assert await store.consume("kept", expires_at, time.time()) is True
        async with coredis.Redis.from_url(redis_server.url) as raw:
            left = await raw.pttl(DEFAULT_PREFIX + "kept")
    assert 35_000 < left <= 40_000  # 10 s of token + 30 s of margin, minus the time taken


# --- each client's share (issue 22): counted in Redis, so it holds across workers ---


async def test_a_clients_share_holds_across_workers_and_others_are_unaffected(
    redis_server: RedisServer,
) -> None:
    # Before (issue 22): no share, one client's spends filled what every client needs.
    async with (
        RedisSingleUse(redis_server.url, max_per_client=3) as one,  # two workers: two pools
        RedisSingleUse(redis_server.url, max_per_client=3) as two,
    ):
        assert await one.consume("a-1", later(), time.time(), client="peer:10.0.0.1")
        assert await two.consume("a-2", later(), time.time(), client="peer:10.0.0.1")
        assert await one.consume("a-3", later(), time.time(), client="peer:10.0.0.1")
        for store in (one, two):
            with pytest.raises(m.server.NonceStoreFull) as caught:
                await store.consume("a-4", later(), time.time(), client="peer:10.0.0.1")
            assert caught.value.code == -32000
            assert "single-use max_per_client=3" in caught.value.message
            assert caught.value.data == {"reason": "own_share"}
        # A replay is still a replay (False), not a refusal; nothing was recorded for a-4.
        assert await two.consume("a-1", later(), time.time(), client="peer:10.0.0.1") is False
        async with coredis.Redis.from_url(redis_server.url) as raw:
            assert await raw.get(DEFAULT_PREFIX + "a-4") is None
            assert await raw.zcard(DEFAULT_PREFIX + "client:peer:10.0.0.1") == 3
        # Another client spends as before.
        assert await two.consume("b-1", later(), time.time(), client="peer:10.0.0.2")


async def test_a_clients_share_frees_as_its_entries_expire(redis_server: RedisServer) -> None:
    async with RedisSingleUse(redis_server.url, max_per_client=2, clock_skew=0) as store:
        for nonce in ("s-1", "s-2"):
            assert await store.consume(nonce, time.time() + 0.4, time.time(), client="peer:c")
        with pytest.raises(m.server.NonceStoreFull):
            await store.consume("s-3", later(), time.time(), client="peer:c")
        await trio.sleep(1.0)  # both expired: Redis's clock drops them from the share
        assert await store.consume("s-3", later(), time.time(), client="peer:c")
        async with coredis.Redis.from_url(redis_server.url) as raw:
            key = DEFAULT_PREFIX + "client:peer:c"
            assert await raw.zcard(key) == 1
            assert 0 < await raw.pttl(key) <= 600_000  # it expires with its last entry


async def test_a_server_that_went_away_fails_closed_then_recovers(
    redis_server: RedisServer,
) -> None:
    async with RedisSingleUse(redis_server.url, timeout=2) as store:
        assert await store.consume("before", later(), time.time()) is True
        redis_server.kill()
        for nonce in ("during-1", "during-2"):
            with pytest.raises(SingleUseStoreUnavailable) as caught:
                await store.consume(nonce, later(), time.time())
            assert isinstance(caught.value, m.server.NonceStoreFull)  # what the app fails closed on
            assert caught.value.code == -32603
            assert "fail closed" in str(caught.value)
        with pytest.raises(SingleUseStoreUnavailable):
            await store.check()
        redis_server.start()  # the same port, an empty store (no persistence)
        assert await store.consume("after", later(), time.time()) is True
        assert await store.consume("after", later(), time.time()) is False


async def test_a_server_that_does_not_answer_fails_closed_within_the_timeout(
    redis_server: RedisServer,
) -> None:
    async with RedisSingleUse(redis_server.url, timeout=0.5) as store:
        await store.check()
        redis_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(SingleUseStoreUnavailable):
                await store.consume("hung", later(), time.time())
            assert time.monotonic() - started < 10  # bounded by the timeout, not forever
        finally:
            redis_server.resume()


async def test_nothing_listening_fails_closed() -> None:
    from scale_services import free_port

    async with RedisSingleUse(f"redis://127.0.0.1:{free_port()}/0", timeout=2) as store:
        with pytest.raises(SingleUseStoreUnavailable, match="did not answer"):
            await store.consume("nobody", later(), time.time())


async def test_misuse_is_a_local_error() -> None:
    with pytest.raises(ValueError, match="redis://"):
        RedisSingleUse("http://127.0.0.1:6379/0")
    with pytest.raises(ValueError, match="timeout"):
        RedisSingleUse("redis://127.0.0.1:6379/0", timeout=0)
    store = RedisSingleUse("redis://127.0.0.1:6379/0")
    with pytest.raises(m.LocalProtocolError, match="async with"):
        await store.consume("n", later(), time.time())
    with pytest.raises(m.LocalProtocolError, match="async with"):
        await store.check()
    async with store:
        for bad in ("", "x" * 257):
            with pytest.raises(m.LocalProtocolError, match="nonce"):
                await store.consume(bad, later(), time.time())


def test_messages_never_show_the_password() -> None:
    assert redacted("redis://:hunter2@db:6379/0") == "redis://:***@db:6379/0"
    assert redacted("redis://ada:hunter2@db/1") == "redis://ada:***@db/1"
    assert redacted("redis://db:6379/0") == "redis://db:6379/0"
    assert "hunter2" not in repr(RedisSingleUse("redis://:hunter2@db:6379/0"))
    assert json.dumps(redacted("unix:///run/redis.sock?db=0"))


async def test_what_the_body_raises_comes_out_unwrapped(redis_server: RedisServer) -> None:
    # the client's task group would wrap it in a group: Ctrl-C must stay a KeyboardInterrupt
    with pytest.raises(KeyError, match="from the body"):
        async with RedisSingleUse(redis_server.url) as store:
            await store.check()
            raise KeyError("from the body")
    with pytest.raises(KeyboardInterrupt):
        async with RedisSingleUse(redis_server.url) as store:
            raise KeyboardInterrupt
