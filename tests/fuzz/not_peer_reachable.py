"""The branches of mrtr_core no peer can reach, each with its reason: ``replay.py``
reports coverage of *all* branches and of the *peer-reachable* ones (all minus these).

Two kinds of entry:

* ``RULES``: a statement whose source starts with one of these is excluded wherever it
  is.  ``raise LocalProtocolError(`` is the rule's core: ``LocalProtocolError`` is the
  documented error for misuse of our own API, so by construction no peer byte may
  reach one (the fuzz targets would report it if one did: they let it out only from
  the app's own calls).
* ``EXCLUSIONS``: one statement (and the block under it) or one whole function,
  named by ``anchor``: ``"def name"`` / ``"def Class.name"`` for a function, else a
  substring of exactly one source line of the module (``replay.py`` fails on an
  anchor that matches no line or several, so the list cannot go stale silently).

A branch is excluded when it starts in, or leads into, an excluded statement.
"""

from __future__ import annotations

from typing import NamedTuple


class Exclusion(NamedTuple):
    module: str  # under mrtr_core/, e.g. "connection/_options.py"
    anchor: str
    reason: str


APP_MISUSE = "a check of our own API's arguments (misuse raises LocalProtocolError)"
ENCODER = "encodes what we write; the fuzz targets feed what a peer sends"

RULES: dict[str, str] = {
    "raise LocalProtocolError(": APP_MISUSE,
    "self._misuse(": APP_MISUSE + " (the engine's own wrapper)",
}

EXCLUSIONS: tuple[Exclusion, ...] = ()
