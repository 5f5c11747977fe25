"""``RedisProofMemory``: the DPoP proofs every worker of one resource server has seen,
on a Redis server (RFC 9449, section 11.1: a proof is good once).

Each worker keeps the proofs it accepted in its own memory by default
(``mrtr_transports.auth.proof_replay.SeenProofs``), so a proof replayed to another
worker within its window would be accepted there.  Workers that share this memory
accept each proof once between them: a claim is one atomic Redis command, so of two
workers that get the same proof at once exactly one accepts it::

    SET <prefix><resource>:<proof digest> 1 NX PXAT <until in ms, plus clock_skew>

OK the first time (claimed now), nil after (claimed before); Redis drops the key once
the proof's window has passed.  The key is bounded and says nothing of the proof: the
proof is named by its SHA-256 digest (``proof_digest``: key thumbprint and ``jti``),
never by its ``jti``, and ``<resource>`` is the first 16 hex digits of the SHA-256 of
the resource's URL, so resources that share a Redis (and a prefix) keep apart.

Failing closed: when Redis cannot be reached, does not answer within ``timeout``, or
answers with an error, :meth:`RedisProofMemory.claim` raises
``ProofMemoryUnavailable`` and the request is refused (503), never accepted.  The
message names no host; the details go to this module's logger (``FailClosed``, the rule
of every store on Redis).  The memory reconnects by itself once Redis is back.

Use (``mrtr serve --http ... --auth-dpop --single-use redis://...`` does this, on the
single-use store's Redis)::

    async with RedisProofMemory("redis://127.0.0.1:6379/0", resource=url) as seen:
        auth = ResourceAuth(..., dpop=Dpop(seen_proofs=seen))
        ...serve...
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import urllib.parse
from types import TracebackType
from typing import Self

import coredis
import coredis.exceptions
import coredis.retry
from coredis.tokens import PureToken

import mrtr_core as m

from ..auth.proof_replay import ProofMemoryUnavailable
from .redis import SCHEMES, FailClosed, close_client, no_retry_client, redacted

__all__ = ["DEFAULT_PROOF_PREFIX", "RedisProofMemory"]

DEFAULT_PROOF_PREFIX = "mrtr:dpop:"
#: A prefix is a short name; with it a key is at most 64 + 17 + 64 characters.
MAX_PREFIX_CHARS = 64
_PREFIX = re.compile(r"[A-Za-z0-9:_.-]{1,64}")

log = logging.getLogger("mrtr.stores.redis_proofs")


class RedisProofMemory:
    """A ``ProofMemory`` on a Redis server, shared by every worker that uses the same URL
    for the same ``resource`` (the endpoint's public URL).

    ``prefix``: what every key starts with.  ``timeout``: seconds a claim may take,
    connecting included, before it fails closed.  ``clock_skew``: seconds a proof is
    kept past its window (Redis expires keys by its own clock, which may run ahead of
    a worker's).  ``max_connections``: the pool's bound.
    """

    def __init__(
        self,
        url: str,
        *,
        resource: str,
        prefix: str = DEFAULT_PROOF_PREFIX,
        timeout: float = 5.0,
        clock_skew: float = 60.0,
        max_connections: int = 16,
    ) -> None:
        if urllib.parse.urlsplit(url).scheme not in SCHEMES:
            raise ValueError(
                f"a proof memory URL starts with redis://, rediss:// or unix://: {url!r}"
            )
        if not _PREFIX.fullmatch(prefix):
            raise ValueError(f"a prefix is 1 to {MAX_PREFIX_CHARS} of [A-Za-z0-9:_.-]")
        if not resource:
            raise ValueError("resource is the endpoint's public URL")
        if not timeout > 0 or not clock_skew >= 0 or max_connections < 1:
            raise ValueError(
                "timeout must be positive, clock_skew 0 or more, max_connections 1 or more"
            )
        self.url = url
        self.resource = resource
        self.timeout = float(timeout)
        self.clock_skew = float(clock_skew)
        #: Every key of this resource starts with this.
        self.namespace = f"{prefix}{hashlib.sha256(resource.encode()).hexdigest()[:16]}:"
        self._client: coredis.Redis[bytes] = no_retry_client(
            url, timeout=self.timeout, max_connections=max_connections
        )
        self._redis = FailClosed(
            url, "the DPoP proof memory", "the proof", ProofMemoryUnavailable, self.timeout, log
        )
        self._open = False

    def __repr__(self) -> str:
        return f"RedisProofMemory({redacted(self.url)!r}, namespace={self.namespace!r})"

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

    def key_of(self, digest: bytes) -> str:
        """The Redis key of the proof ``digest``."""
        return self.namespace + digest.hex()

    async def claim(self, digest: bytes, *, until: float, now: float) -> bool:
        """Claim the proof ``digest`` until ``until`` (plus ``clock_skew``): ``True``
        the first time, by any worker; ``False`` after.  ``ProofMemoryUnavailable`` when
        Redis cannot answer.  ``now`` is unused: Redis expires the key by its own clock."""
        if not self._open:
            raise m.LocalProtocolError("RedisProofMemory is used inside `async with memory:`")
        if len(digest) != 32:
            raise m.LocalProtocolError("a proof is claimed by its 32-byte digest (proof_digest)")
        expires_ms = max(1, math.ceil((until + self.clock_skew) * 1000))
        command = self._client.set(
            self.key_of(digest), b"1", condition=PureToken.NX, pxat=expires_ms
        )
        return bool(await self._redis.answer(command))

    async def check(self) -> None:
        """Ask Redis for a PONG; ``ProofMemoryUnavailable`` when it cannot answer."""
        if not self._open:
            raise m.LocalProtocolError("RedisProofMemory is used inside `async with memory:`")
        await self._redis.answer(self._client.ping())
