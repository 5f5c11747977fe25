"""Shared state for several server processes: the sealing keys and single-use stores.

``keys``: the JSON document of sealing keys every worker of one deployment loads
(``mrtr serve --state-keys``).  ``redis``: :class:`~mrtr_transports.stores.redis.RedisSingleUse`,
a single-use store on a Redis server (``pip install 'mrtr[redis]'``), imported
from its module so that this package needs no Redis client.
"""
