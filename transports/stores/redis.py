"""``RedisSingleUse``: the single-use store of several server processes, on a Redis server.

The model: a sealed ``requestState`` can be sent again (a replay), so an
``McpApp`` spends every state it redeems in its single-use store before the
handler runs (``mrtr_transports.apps.single_use.SingleUseStore``), and ``ctx.once``
guards and the last step of ``Steps`` run at most once.  One process can keep
that store in memory; several processes that serve one deployment (any worker
may get any leg) must share it, or a replay sent to another worker would be
served again.

Each spend is one atomic Redis command, so concurrent spends of one nonce from
any number of tasks and processes give exactly one True::

    SET <prefix><nonce> 1 NX PXAT <expires_at in ms, plus clock_skew>

It answers OK the first time (True: spent now) and nil after (False: spent
before).  The key expires with the token (Redis drops it by itself), kept
``clock_skew`` seconds longer so a worker whose clock runs behind Redis's
still finds it while it still takes the token as unexpired.

Each client has a share (``max_per_client`` unexpired entries, the same in
every worker): the spend is one Lua script, atomic as the ``SET`` alone was,
that also keeps the client's entries in a sorted set by expiry
(``<prefix>client:<client key>``), drops the expired ones by Redis's clock,
refuses the spend when the client holds its share (-32000 naming the bound,
nothing recorded), and expires the set with its last entry.

Failing closed: when Redis cannot be reached, does not answer within
``timeout``, or answers with an error, :meth:`RedisSingleUse.consume` raises
:class:`SingleUseStoreUnavailable` (a ``mrtr_core.server.NonceStoreFull``, so the
app refuses the leg with -32603) rather than guess: the handler does not run.
Its message names no host (it may reach the client); the details go to this
module's logger.  The store reconnects by itself once Redis is back.

Use::

    store = RedisSingleUse("redis://127.0.0.1:6379/0")
    async with store:  # opens the connection pool; closes it on exit
        app.configure_state(keys, "k1", single_use=store)
        ...serve...

The client is ``coredis`` (anyio-based: it runs on trio and on asyncio; redis-py's asyncio
client runs on asyncio only).  ``mrtr serve --single-use redis://...`` does all of this.
"""

from __future__ import annotations

import hashlib
import logging
import math
import urllib.parse
from collections.abc import Awaitable
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import attrs
import coredis
import coredis.exceptions
import coredis.retry

import mrtr_core as m

from .._shares import CURRENT_CLIENT, ShareRefusal
from ..apps.single_use import DEFAULT_MAX_SINGLE_USE_PER_CLIENT, ENTRIES, PER_CLIENT_SETTING

__all__ = ["DEFAULT_PREFIX", "RedisSingleUse", "SingleUseStoreUnavailable"]

#: KEYS[1]: the nonce's key; KEYS[2]: the client's entries (a sorted set, by expiry).
#: ARGV[1]: the entry's expiry (ms since the epoch); ARGV[2]: the client's share.
#: 1: spent now; 0: spent before; -1: the client holds its share (nothing recorded).
_SPEND = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then return -1 end
redis.call('SET', KEYS[1], '1', 'PXAT', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[1], KEYS[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[2], last[2])
return 1
"""
#: A client key longer than this is named by its digest in the set's key.
_MAX_CLIENT_CHARS = 200

DEFAULT_PREFIX = "mrtr:once:"
#: URL schemes coredis connects with: TCP, TLS, a Unix socket.
SCHEMES = ("redis", "rediss", "unix")
# A nonce is ours (it comes out of a verified token) but the key length is bounded anyway.
MAX_NONCE_CHARS = 256

T = TypeVar("T")

log = logging.getLogger("mrtr.stores.redis")


class SingleUseStoreUnavailable(m.server.NonceStoreFull):
    """The store could not say whether a nonce was spent: the leg is refused (fail closed)."""


class RedisSingleUse:
    """A single-use store on a Redis server, shared by every process that uses the same URL.

    ``url``: ``redis://[[user]:password@]host:port/db`` (``rediss://`` for TLS,
    ``unix:///path/to/socket?db=0``).  ``prefix``: what every key starts with
    (one Redis can serve several deployments under different prefixes).
    ``timeout``: seconds a spend may take, connecting included, before it
    fails closed.  ``clock_skew``: seconds a spent nonce is kept past its
    token's expiry.  ``max_connections``: the pool's bound.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = 5.0,
        clock_skew: float = 60.0,
        max_connections: int = 16,
        max_per_client: int = DEFAULT_MAX_SINGLE_USE_PER_CLIENT,
    ) -> None:
        scheme = urllib.parse.urlsplit(url).scheme
        if scheme not in SCHEMES:
            raise ValueError(
                f"a single-use store URL starts with redis://, rediss:// or unix://: {url!r}"
            )
        if not timeout > 0 or not clock_skew >= 0 or max_connections < 1 or max_per_client < 1:
            raise ValueError(
                "timeout must be positive, clock_skew 0 or more, "
                "max_connections and max_per_client 1 or more"
            )
        self.url = url
        self.prefix = prefix
        self.timeout = float(timeout)
        self.clock_skew = float(clock_skew)
        self.max_per_client = max_per_client
        self._client: coredis.Redis[bytes] = no_retry_client(
            url, timeout=self.timeout, max_connections=max_connections
        )
        self._spend = self._client.register_script(_SPEND)
        self._redis = FailClosed(
            self.url,
            "the single-use store",
            "the leg",
            SingleUseStoreUnavailable,
            self.timeout,
            log,
        )
        self._open = False

    def __repr__(self) -> str:
        return f"RedisSingleUse({redacted(self.url)!r}, prefix={self.prefix!r})"

    async def __aenter__(self) -> Self:
        await self._redis.open(self._client)
        self._open = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._open = False
        await close_client(self._client, exc_type, exc, tb)

    async def consume(
        self, nonce: str, expires_at: float, now: float, *, client: str | None = None
    ) -> bool:
        """Spend ``nonce`` until ``expires_at`` for ``client`` (``Context.client``; by
        default the request's): True the first time, False after.

        Raises :class:`SingleUseStoreUnavailable` when Redis cannot answer, and a
        ``NonceStoreFull`` of code -32000 when ``client`` holds ``max_per_client``
        unexpired entries.  ``now`` is unused: Redis expires the key by its own clock.
        """
        if not self._open:
            raise m.LocalProtocolError("RedisSingleUse is used inside `async with store:`")
        if not isinstance(nonce, str) or not 0 < len(nonce) <= MAX_NONCE_CHARS:
            raise m.LocalProtocolError(f"a nonce is a string of 1 to {MAX_NONCE_CHARS} characters")
        expires_ms = max(1, math.ceil((expires_at + self.clock_skew) * 1000))
        key = self.prefix + nonce
        client = client if client is not None else CURRENT_CLIENT.get()
        keys = [key, f"{self.prefix}client:{client_key_part(client)}"]
        spend: Awaitable[int] = self._spend(keys=keys, args=[expires_ms, self.max_per_client])
        answer = await self._redis.answer(spend)
        if answer == -1:
            share = self.max_per_client
            refused = ShareRefusal.for_own_share(share, ENTRIES, PER_CLIENT_SETTING, share)
            raise refused.error(m.server.NonceStoreFull)
        return answer == 1

    async def check(self) -> None:
        """Ask Redis for a PONG; :class:`SingleUseStoreUnavailable` when it cannot answer."""
        if not self._open:
            raise m.LocalProtocolError("RedisSingleUse is used inside `async with store:`")
        await self._redis.answer(self._client.ping())


@attrs.frozen
class FailClosed:
    """A Redis command's answer within ``timeout``, or the store's refusal: one rule for
    every store on Redis (:class:`RedisSingleUse`, ``RedisTaskStore``).

    ``store`` names the store and ``refusing`` what it refuses, in the message of the
    ``error`` raised; that message may reach the client (as a -32603's message), so it
    names no host: ``log`` gets the address and the cause.
    """

    url: str
    store: str
    refusing: str
    error: type[Exception]
    timeout: float
    log: logging.Logger

    async def answer(self, command: Awaitable[T]) -> T:
        """What Redis answered to ``command``, within ``timeout``, or fail closed."""
        try:
            with anyio.fail_after(self.timeout):
                return await command
        except (coredis.exceptions.RedisError, OSError, TimeoutError) as exc:
            raise self.unavailable(exc) from exc

    async def open(self, client: coredis.Redis[Any]) -> None:
        """Open ``client``'s pool, or fail closed (a store's ``__aenter__``)."""
        try:
            await client.__aenter__()
        except (coredis.exceptions.RedisError, OSError) as exc:
            raise self.unavailable(exc) from exc

    def unavailable(self, exc: BaseException) -> Exception:
        """The refusal for ``exc`` (to raise ``from`` it), logged with its details."""
        self.log.warning("%s %s did not answer: %r", self.store, redacted(self.url), exc)
        return self.error(f"{self.store} did not answer: refusing {self.refusing} (fail closed)")


def no_retry_client(
    url: str, *, timeout: float, max_connections: int, decode_responses: bool = False
) -> coredis.Redis[Any]:
    """A client of ``url`` that sends each command once, each wait bounded by
    ``timeout``: a write that reached Redis before its connection broke would, sent
    again, read its own first effect as another's (a spent nonce, a claimed proof, a task
    changed).  Failing is honest; the request fails closed and the client asks again."""
    options: dict[str, Any] = {
        "retry_policy": coredis.retry.NoRetryPolicy(),
        "connect_timeout": timeout,
        "stream_timeout": timeout,
        "pool_timeout": timeout,
        "max_connections": max_connections,
    }
    if decode_responses:
        return coredis.Redis.from_url(url, decode_responses=True, **options)
    return coredis.Redis.from_url(url, **options)


async def close_client(
    client: coredis.Redis[Any],
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    tb: TracebackType | None,
) -> None:
    """Close ``client`` in a store's ``__aexit__`` (given its arguments): the pool's task
    group wraps what the store's block raised in a group (Ctrl-C included), so that goes
    on as it was raised."""
    try:
        await client.__aexit__(exc_type, exc, tb)
    except BaseExceptionGroup as group:
        if exc is None or _leaves(group) != [exc]:
            raise


def client_key_part(client: str) -> str:
    """A client key as it goes into a Redis key: itself, or its digest when it is long."""
    if len(client) > _MAX_CLIENT_CHARS:
        return "sha256:" + hashlib.sha256(client.encode()).hexdigest()
    return client


def redacted(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urllib.parse.urlunsplit(parts._replace(netloc=user + host))


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for inner in group.exceptions:
        found += _leaves(inner) if isinstance(inner, BaseExceptionGroup) else [inner]
    return found
