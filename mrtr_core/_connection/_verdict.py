"""What a client learned about a server's era, to remember and pass back in.

After its probe a client knows which era the server speaks and the version
agreed; a :class:`Verdict` holds that (plus, over stdio, whether the server
died of the ``server/discover`` probe).  A caller may keep it (as JSON) and
give it to the next client for the same server, which then skips the probe
and starts with the era's own first step.  A verdict read back from storage
is input like any other: :meth:`Verdict.from_json` checks every field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._errors import LocalProtocolError, describe
from .._meta import LEGACY_VERSIONS, MODERN_VERSIONS, Era


@attrs.frozen(kw_only=True)
class Verdict:
    """The era a server speaks and the version agreed with it.

    ``probe_kills``: the server exited (or closed its output) when it saw
    ``server/discover``, so the probe must never be sent to it again.
    """

    era: Era
    protocol_version: str
    probe_kills: bool = False

    def __attrs_post_init__(self) -> None:
        if self.era not in ("modern", "legacy"):
            raise LocalProtocolError(f"a verdict's era is 'modern' or 'legacy', not {self.era!r}")
        known = MODERN_VERSIONS if self.era == "modern" else LEGACY_VERSIONS
        if self.protocol_version not in known:
            raise LocalProtocolError(
                f"{describe(self.protocol_version)} is not a {self.era} protocol version"
            )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``from_json`` reads it back)."""
        out: dict[str, Any] = {"era": self.era, "protocolVersion": self.protocol_version}
        if self.probe_kills:
            out["probeKills"] = True
        return out

    @classmethod
    def from_json(cls, value: Any) -> Verdict:
        """The verdict ``value`` (as ``to_json`` made it) holds; ``LocalProtocolError``
        when it is not one (a stale or edited file is the caller's to handle)."""
        if not isinstance(value, Mapping):
            raise LocalProtocolError(f"a verdict is a JSON object, not {describe(value)}")
        era, version = value.get("era"), value.get("protocolVersion")
        probe_kills = value.get("probeKills", False)
        if not isinstance(era, str) or not isinstance(version, str):
            raise LocalProtocolError("a verdict needs 'era' and 'protocolVersion' strings")
        if not isinstance(probe_kills, bool):
            raise LocalProtocolError("a verdict's 'probeKills' is true or false")
        return cls(era=era, protocol_version=version, probe_kills=probe_kills)  # type: ignore[arg-type]
