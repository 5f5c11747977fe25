"""``mrtr call --verdicts FILE``: the era each server speaks, remembered between runs.

The model: a client learns a server's era by probing (``server/discover``, then
``initialize`` for a 2025 server); the spec lets a client persist that per
server configuration and re-probe when it later fails.  ``--verdicts FILE``
keeps one JSON object, ``{TARGET: verdict}``, where TARGET is the command line's
target string as given and a verdict is
:meth:`mrtr_core.Verdict.to_json` (``era``, ``protocolVersion``,
``probeKills``).  Before the call the target's verdict, if any, is passed as
``prior=`` (no probe); after it, what the client learned is written back.  A
wrong verdict costs one probe, never a failure (``client/era.py``).

Nothing is remembered without the option: no hidden state in the home
directory.  The file is bounded (``MAX_FILE_SIZE`` read, ``MAX_ENTRIES`` kept,
the oldest dropped first); an unreadable or malformed file, or entry, is
ignored with a warning (it is a cache) and rewritten whole, atomically.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import mrtr_core as m
from mrtr_core import Verdict

logger = logging.getLogger("mrtr.cli")

MAX_FILE_SIZE = 1024 * 1024
MAX_ENTRIES = 1000


class VerdictFile:
    """The verdicts of one ``--verdicts`` file (read once, written back on ``remember``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._entries: dict[str, dict[str, object]] = self._read()

    def _read(self) -> dict[str, dict[str, object]]:
        try:
            with open(self.path, "rb") as file:
                raw = file.read(MAX_FILE_SIZE + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            logger.warning("--verdicts %s: cannot read it (%s): ignored", self.path, exc)
            return {}
        if len(raw) > MAX_FILE_SIZE:
            logger.warning("--verdicts %s: larger than %d bytes: ignored", self.path, MAX_FILE_SIZE)
            return {}
        try:
            value = json.loads(raw)
        except ValueError:
            logger.warning("--verdicts %s: not JSON: ignored", self.path)
            return {}
        if not isinstance(value, dict):
            logger.warning("--verdicts %s: not a JSON object: ignored", self.path)
            return {}
        return {k: v for k, v in value.items() if isinstance(v, dict)}

    def prior(self, target: str) -> Verdict | None:
        """The verdict remembered for ``target`` (``None``: none, or not a valid one)."""
        entry = self._entries.get(target)
        if entry is None:
            return None
        try:
            return Verdict.from_json(entry)
        except m.LocalProtocolError as exc:
            logger.warning("--verdicts: the entry for %r is no verdict (%s): ignored", target, exc)
            return None

    def remember(self, target: str, verdict: Verdict) -> None:
        """Write ``verdict`` for ``target`` (newest last; the oldest dropped past the bound)."""
        self._entries.pop(target, None)
        self._entries[target] = verdict.to_json()
        while len(self._entries) > MAX_ENTRIES:
            del self._entries[next(iter(self._entries))]
        text = json.dumps(self._entries, indent=2, sort_keys=False) + "\n"
        directory = self.path.parent
        try:
            fd, temporary = tempfile.mkstemp(prefix=".verdicts-", dir=directory)
            with os.fdopen(fd, "w") as file:
                file.write(text)
            os.replace(temporary, self.path)
        except OSError as exc:
            logger.warning("--verdicts %s: cannot write it (%s)", self.path, exc)
