"""``wire_variant``: run a test module twice, the second time with the message variants.

A module opts in with ``pytestmark = pytest.mark.usefixtures("wire_variant")``.
Its ``[messages]`` run replaces ``Connection`` (in the module and in
``support.pairing``) by :class:`support.twin.TwinConnection`, which drives a
second connection through ``receive_message``/``send_message`` next to the one
the test drives through bytes, and fails the test wherever the two differ.
"""

from __future__ import annotations

import pytest
import support.pairing
from support.twin import TwinConnection


@pytest.fixture(params=["bytes", "messages"])
def wire_variant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "messages":
        monkeypatch.setattr(request.module, "Connection", TwinConnection)
        monkeypatch.setattr(support.pairing, "Connection", TwinConnection)
    return str(request.param)
