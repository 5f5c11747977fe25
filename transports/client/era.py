"""The client's era control: ``era=``, a remembered :class:`~mrtr_core.Verdict`
passed back as ``prior=``, and the second chances a probe or a prior gets.

The model: a client starts in one of three ways.  ``era="auto"`` probes
``server/discover`` and falls back to ``initialize``; ``"modern"`` and
``"legacy"`` go straight to that era.  A ``prior`` (what an earlier client
learned, ``client.verdict``) overrides ``era``: its era, its version first,
and no probe.  Two things can then go wrong, and each gets exactly one
second chance, after which the error stands (a wrong prior's probe may still
use the stdio restart below):

* **A wrong prior** (the server changed).  A legacy prior fails at
  ``initialize``; a modern prior fails at its first request with what a 2025
  server answers a request it cannot place (HTTP 400/404/405, a JSON-RPC
  -32600/-32601, or a stdio server that exits).  The client then starts over
  with ``era="auto"``: one probe.
* **A stdio server that dies of the probe.**  Some 2025-only servers exit (or
  close stdout) on a method they do not know.  With ``era="auto"``, when the
  link is lost while ``server/discover`` is the only thing we sent, the child
  is started again and the client goes straight to ``initialize``; the verdict
  then says ``probe_kills`` so a caller that passes it back never probes that
  server again.
"""

from __future__ import annotations

from typing import Literal

import mrtr_core as m
from mrtr_core import Verdict

from .errors import CallError, ClientError, TransportError

__all__ = ["EraChoice", "EraControl", "Verdict"]

EraChoice = Literal["auto", "modern", "legacy"]

#: JSON-RPC codes a 2025 server answers a request it cannot place (no session yet).
_LEGACY_REFUSALS = frozenset({m.ErrorCode.INVALID_REQUEST, m.ErrorCode.METHOD_NOT_FOUND})


class EraControl:
    """What era the next connection starts in, and whether a failure earns a retry."""

    def __init__(self, era: EraChoice, prior: Verdict | None) -> None:
        if era not in ("auto", "modern", "legacy"):
            raise ValueError(f"era must be 'auto', 'modern' or 'legacy', not {era!r}")
        if prior is not None and not isinstance(prior, Verdict):
            raise TypeError("prior must be a mrtr_core.Verdict (client.verdict)")
        self.requested = era
        self.prior = prior
        self.era: EraChoice = prior.era if prior is not None else era
        #: The server dies of ``server/discover`` (learned here, or from the prior).
        self.probe_kills = prior.probe_kills if prior is not None else False
        #: A prior not yet confirmed by an answer (a modern prior has no handshake).
        self.unconfirmed = prior is not None
        self._prior_retried = False
        self._restarted = False

    def versions(self) -> tuple[str, ...]:
        """The versions the connection offers, the prior's first."""
        versions = m.ALL_VERSIONS
        if self.prior is None or self.era != self.prior.era:
            return versions
        first = self.prior.protocol_version
        return (first, *(v for v in versions if v != first))

    def after_open_failure(
        self, error: ClientError, *, probing: bool, restartable: bool
    ) -> EraChoice | None:
        """Opening failed with ``error``: the era to start over in, or ``None`` (give up).
        ``probing``: the link was lost while ``server/discover`` was in flight;
        ``restartable``: the link can start the server again (stdio)."""
        if self.unconfirmed:
            return self._forget_prior()
        died = isinstance(error, TransportError) and error.kind == "disconnect"
        if self.era == "auto" and probing and died and restartable and not self._restarted:
            self._restarted = True
            self.probe_kills = True
            self.era = "legacy"
            return self.era
        return None

    def after_first_failure(self, error: ClientError) -> EraChoice | None:
        """The first request of a modern prior failed with ``error``: ``"auto"`` when that
        is what a 2025 server says (the prior is wrong), else ``None``."""
        if not self.unconfirmed or self.era != "modern":
            return None
        if isinstance(error, TransportError):
            legacy = (error.kind == "http" and error.status in (400, 404, 405)) or (
                error.kind == "disconnect"
            )
        else:
            legacy = isinstance(error, CallError) and error.code in _LEGACY_REFUSALS
        return self._forget_prior() if legacy else None

    def confirmed(self) -> None:
        self.unconfirmed = False

    def _forget_prior(self) -> EraChoice:
        """The prior was wrong: probe, once (the probe keeps its own second chance)."""
        self.unconfirmed = False
        self.prior = None
        self.probe_kills = False
        self.era = "auto"
        return self.era

    def verdict(self, era: str | None, version: str | None) -> Verdict | None:
        """What was learned, once the era is settled."""
        if era is None or version is None:
            return None
        settled: m.Era = "modern" if era == "modern" else "legacy"
        return Verdict(era=settled, protocol_version=version, probe_kills=self.probe_kills)
