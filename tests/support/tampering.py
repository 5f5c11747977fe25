"""Changing a peer's sealed ``requestState`` so that it must be refused.

Changing the *last* character of a base64url token is not enough: its last
character carries bits the encoding pads with, and a lenient decoder (Node's
``Buffer.from(…, "base64url")``) ignores them, so ``…B`` may decode to the very
bytes ``…A`` does and the "tampered" state passes.  A character in the middle of
the token's longest base64url run carries six significant bits.
"""

from __future__ import annotations

import re

_RUN = re.compile(r"[A-Za-z0-9_-]+")


def tampered(state: str) -> str:
    """``state`` with one significant character changed."""
    run = max(_RUN.finditer(state), key=lambda found: len(found.group()))
    index = (run.start() + run.end()) // 2
    replacement = "A" if state[index] != "A" else "B"
    return state[:index] + replacement + state[index + 1 :]
