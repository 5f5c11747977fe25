"""The one "nothing to hand out yet" sentinel type, shared by every layer.

``next_event`` of a ``Connection`` returns ``NEED_DATA`` when it needs bytes;
``next_event`` of a ``RoundEngine`` or a ``LegacyShim`` returns the member
that says what it waits for, or ``FINISHED``.  One enum, so an event loop
that drives several of them tests ``isinstance(event, Wait)`` once.
"""

from __future__ import annotations

import enum
from typing import Final


class Wait(enum.Enum):
    """Nothing to hand out yet, and what would change that."""

    NEED_DATA = "need_data"  #: feed the peer's bytes (``receive_data``)
    NEED_START = "need_start"  #: call ``start(now)`` (a shim: ``start`` or ``resume``)
    NEED_RESULT = "need_result"  #: a leg is out: its result, error, timeout or break
    NEED_INPUT = "need_input"  #: questions are out: their answers, or a failure
    FINISHED = "finished"  #: the end was handed out; nothing more will come


NEED_DATA: Final = Wait.NEED_DATA
NEED_START: Final = Wait.NEED_START
NEED_RESULT: Final = Wait.NEED_RESULT
NEED_INPUT: Final = Wait.NEED_INPUT
FINISHED: Final = Wait.FINISHED
