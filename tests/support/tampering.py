"""Changing a peer's sealed ``requestState`` so that it must be refused.

The rule has one home, :func:`mrtr_transports.testing.attacks.tampered` (the
request-state attacks of the test client use it too): a character in the middle
of the token's longest base64url run, never the last character, whose padding
bits a lenient decoder ignores.
"""

from __future__ import annotations

from mrtr_transports.testing.attacks import tampered

__all__ = ["tampered"]
