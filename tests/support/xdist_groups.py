"""Telling ``--dist loadgroup`` an item's ``xdist_group``, as pytest-xdist means to.

pytest-xdist (3.8) tells its scheduler an item's group by renaming the item
``NODEID@GROUP`` through ``item._nodeid``, which pytest 9 no longer reads (a node's id
is ``item._id``), and its scheduler ignores a group whose name holds ``]`` (it takes
the ``@`` only when it comes after the last ``]``).  Either way the group is spread
over the workers silently: each builds its own copy of a fixture meant to be shared
(a cluster of nginx and redis, a server per loop), and tests meant to run one at a
time run side by side.  :func:`name_its_group` renames the item in the id pytest
reads, and refuses a name the scheduler would ignore.
"""

from __future__ import annotations

import pytest
from _pytest.nodeid import NodeId

#: What a group's name cannot hold: xdist would not see the group.
UNSEEN = ("]", "@")


def name_its_group(item: pytest.Item) -> None:
    """Rename ``item`` ``NODEID@GROUP`` for its ``xdist_group`` marks, if it has any
    (call it on an xdist worker run with ``--dist loadgroup``, after marking)."""
    groups = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    for group in groups:
        if any(char in group for char in UNSEEN):
            raise pytest.UsageError(f"xdist would not see the group {group!r} of {item.nodeid}")
    if groups and "@" not in item.nodeid and hasattr(item, "_id"):
        item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(sorted(groups))}")
