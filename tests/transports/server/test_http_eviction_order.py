"""Which waiting connection a newcomer evicts: a kept-alive one before a request on its way.

Evicting a connection kept alive between requests, once it has been idle past
the kept-alive grace (``KEPT_ALIVE_GRACE``: a younger one may carry a request
its client has just written), costs its client nothing now (it sees the close,
or notices it before its next request, and opens another); evicting one whose
request is arriving costs that client a 503 and a retry.  Fresh connections are
not in the first group: a flood of them must not shield the oldest trickler.
"""

from __future__ import annotations

import pytest
from mrtr_transports.host.bounds import check_bounds
from mrtr_transports.host.slots import ConnectionSlots


class Conn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.evicted = False

    def evict(self) -> None:
        self.evicted = True


def test_a_kept_alive_connection_goes_before_a_request_on_its_way() -> None:
    slots = ConnectionSlots(3)
    arriving, kept, fresh = Conn("arriving"), Conn("kept"), Conn("fresh")
    assert slots.admit(arriving) and slots.admit(kept)
    slots.busy(kept)
    slots.waiting(kept)  # answered: kept alive, and younger than `arriving`
    assert slots.admit(fresh)
    assert slots.admit(Conn("new")) and kept.evicted and not arriving.evicted
    # Without kept-alive ones, the longest waiter goes, fresh or not.
    assert slots.admit(Conn("newer")) and arriving.evicted and not fresh.evicted


def test_a_kept_alive_connection_whose_next_request_arrives_waits_as_others_do() -> None:
    slots = ConnectionSlots(2)
    old, kept = Conn("old"), Conn("kept")
    assert slots.admit(old) and slots.admit(kept)
    slots.busy(kept)
    slots.waiting(kept)
    slots.arriving(kept)  # its next request has begun: no longer first to go
    slots.arriving(old)  # (not kept alive: nothing changes)
    assert slots.admit(Conn("new")) and old.evicted and not kept.evicted
    slots.busy(kept)
    assert kept in slots and len(slots) == 2


@pytest.mark.parametrize(
    ("counts", "seconds", "message"),
    [
        ((("max_connections", 0),), (), "max_connections must be a positive integer"),
        ((("max_body_size", 1.5),), (), "max_body_size must be a positive integer"),
        ((("max_sessions", 1),), (("idle_timeout", 0.0),), "idle_timeout must be a positive"),
        ((), (("write_timeout", -1),), "write_timeout must be a positive number of seconds"),
    ],
)
def test_check_bounds_names_the_first_bound_out_of_range(
    counts: tuple[tuple[str, int], ...], seconds: tuple[tuple[str, float], ...], message: str
) -> None:
    # one check for every HTTP server's bounds (the host and McpAsgi)
    with pytest.raises(ValueError, match=message):
        check_bounds(counts, seconds)
    check_bounds((("max_connections", 1),), (("idle_timeout", 0.001),))  # in range: nothing
