"""Shared state for several server processes: the sealing keys, single-use and task stores.

``keys``: the JSON document of sealing keys every worker of one deployment loads
(``mrtr serve --state-keys``).  ``redis``: :class:`~mrtr_transports.stores.redis.RedisSingleUse`,
a single-use store on a Redis server (``pip install 'mrtr[redis]'``).  ``redis_tasks``:
:class:`~mrtr_transports.stores.redis_tasks.RedisTaskStore`, the tasks of every worker on
a Redis server (``mrtr serve --task-store``), with what it stores in ``task_codec``
(a task's record as JSON) and ``task_scripts`` (the keys, and the Lua scripts that
change them).  ``redis_proofs``: :class:`~mrtr_transports.stores.redis_proofs.RedisProofMemory`,
the DPoP proofs every worker of a resource server has seen (``mrtr serve --auth-dpop
--single-use``).  Each is imported from its module, so that this package needs no Redis
client.
"""
