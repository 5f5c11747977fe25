"""Where ``RedisTaskStore`` keeps a deployment's tasks in Redis, and the Lua scripts that
change them: each script is one atomic step on a task's keys.

The keys, under the store's ``prefix`` (:class:`TaskKeys`): a task's record
(``task:<id>``, :mod:`~mrtr_transports.stores.task_codec`'s JSON), the running
worker's lease on it (``lease:<id>``), the pool and each client's share (sorted sets
of task ids by when their record goes: ``pool``, ``client:<client key>``), and the
channel of status notifications (``events``).

Times: the scripts take the app's clock (``now``, ms) for the sorted sets' scores, as
the store's records are dated by it; every Redis expiry is relative (``PX``), so no
worker's clock skew moves another's lease.
"""

from __future__ import annotations

import attrs

from ..apps.task_store import TaskRecord
from .redis import client_key_part

__all__ = ["CREATE", "RENEW", "SWAP", "TaskKeys"]

#: A sorted set's expiry follows its last member's score (ms, app clock).
_KEEP = """
local function keep(key, now)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIRE', key, math.max(1, tonumber(last[2]) - now)) end
end
"""

#: KEYS: the record, the lease, the pool, the client's set.  ARGV: the record, its
#: expiry (ms from now), when it goes (ms, app clock), now (ms, app clock), the client's
#: share, the pool's bound, the task id, the lease (ms).
#: {1, held}: created; {-1, held}: the client holds its share; {-2, held}: the pool is full.
CREATE = (
    _KEEP
    + """
local now = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local held = redis.call('ZCARD', KEYS[4])
if held >= tonumber(ARGV[5]) then return {-1, held} end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[6]) then return {-2, held} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[8])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[7])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[7])
keep(KEYS[3], now)
keep(KEYS[4], now)
return {1, held + 1}
"""
)

#: KEYS: the record, the lease, the pool, the client's set.  ARGV: the record as read,
#: the record to write, its expiry (ms from now; "keep": unchanged), when it goes (ms,
#: app clock), now (ms, app clock), "1" if terminal (the lease goes), "1" if the write
#: needs the lease absent, the task id.  1: written; 0: the record (or lease) changed.
SWAP = (
    _KEEP
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[7] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if ARGV[3] == 'keep' then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if ARGV[6] == '1' then redis.call('DEL', KEYS[2]) end
local now = tonumber(ARGV[5])
for i = 3, 4 do
  redis.call('ZADD', KEYS[i], 'XX', ARGV[4], ARGV[8])
  keep(KEYS[i], now)
end
return 1
"""
)

#: KEYS: leases to renew.  ARGV[1]: the lease (ms).
RENEW = """
for _, key in ipairs(KEYS) do redis.call('SET', key, '1', 'PX', ARGV[1]) end
return #KEYS
"""


@attrs.frozen
class TaskKeys:
    """The names of a deployment's task keys, under ``prefix``."""

    prefix: str

    def record(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def lease(self, task_id: str) -> str:
        return f"{self.prefix}lease:{task_id}"

    @property
    def events(self) -> str:
        """The channel of status notifications."""
        return self.prefix + "events"

    def of(self, record: TaskRecord) -> list[str]:
        """The ``KEYS`` of :data:`CREATE` and :data:`SWAP` for ``record``."""
        return [
            self.record(record.task_id),
            self.lease(record.task_id),
            f"{self.prefix}pool",
            f"{self.prefix}client:{client_key_part(record.client)}",
        ]
