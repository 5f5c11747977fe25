"""Reading the peer's side of the era question: ``server/discover`` and ``initialize``.

Pure functions: they say what an answer means (an era settled, a fallback, a
failure) and the client handshake applies that to its session table.
:class:`Agreement` holds what is settled so far, shared by the parts of a
connection that read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from .._errors import UNSUPPORTED_PROTOCOL_VERSION, MrtrError, RemoteProtocolError, describe
from .._meta import META_SERVER_INFO, Era, choose_version
from ..wire._model import ErrorObject

FALL_BACK: Literal["fall back"] = "fall back"


@attrs.frozen(kw_only=True)
class Settled:
    """What the server told us once the era is known."""

    era: Era
    protocol_version: str
    peer_info: Mapping[str, Any] | None
    peer_capabilities: Mapping[str, Any]
    instructions: str | None


class Agreement:
    """What the two ends have settled so far: the era, the protocol version in use
    and what the peer said about itself.  The client's handshake, a -32022 retry
    and a server's ``initialize`` move it; the rest of the connection reads it."""

    __slots__ = ("era", "peer_capabilities", "peer_info", "protocol_version")

    def __init__(self) -> None:
        self.era: Era | None = None
        self.protocol_version: str | None = None
        self.peer_info: Mapping[str, Any] | None = None
        self.peer_capabilities: Mapping[str, Any] = {}

    def settle(self, settled: Settled) -> None:
        self.era = settled.era
        self.protocol_version = settled.protocol_version
        self.peer_info = settled.peer_info
        self.peer_capabilities = settled.peer_capabilities


def version_to_retry(error: ErrorObject, modern: Sequence[str]) -> str | None:
    """The version to send again with after a -32022 naming one we speak, else ``None``.

    Even the version we sent: a server may reject a request for another reason
    first (the conformance suite's request-metadata scenario does); each call and
    the probe retry only once, so this cannot loop.
    """
    if error.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(error.data, Mapping):
        return None
    return choose_version(error.data.get("supported"), modern)


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_discover_result(
    result: Mapping[str, Any], modern: Sequence[str], legacy: Sequence[str]
) -> Settled | Literal["fall back"] | MrtrError:
    """A ``server/discover`` result: the modern era, a fallback to initialize (it offers
    only 2025 versions, or it is no ``DiscoverResult`` at all), or a failure (it
    offers versions, none of which we speak).

    A result without a ``supportedVersions`` list is a 2025 server answering a
    method it does not know its own way (some answer any request with ``{}``):
    the spec's compatibility matrix lets a legacy server "process an
    era-ambiguous method under legacy semantics", and only a recognised modern
    answer keeps a dual-era client from falling back.
    """
    offered = result.get("supportedVersions")
    if not isinstance(offered, list):
        return FALL_BACK
    version = choose_version(offered, modern)
    if version is None:
        if choose_version(offered, legacy):
            return FALL_BACK
        return RemoteProtocolError("server/discover offers no protocol version we speak")
    meta = _mapping(result.get("_meta"))
    return Settled(
        era="modern",
        protocol_version=version,
        peer_info=_mapping(meta.get(META_SERVER_INFO)) if meta is not None else None,
        peer_capabilities=_mapping(result.get("capabilities")) or {},
        instructions=_text(result.get("instructions")),
    )


def read_initialize_result(result: Mapping[str, Any], legacy: Sequence[str]) -> Settled | MrtrError:
    """An ``initialize`` result: the 2025 era, unless it picked a version we do not speak."""
    version = result.get("protocolVersion")
    if not isinstance(version, str) or version not in legacy:
        return RemoteProtocolError(
            f"the server chose protocol version {describe(version)}, which we do not speak"
        )
    return Settled(
        era="legacy",
        protocol_version=version,
        peer_info=_mapping(result.get("serverInfo")),
        peer_capabilities=_mapping(result.get("capabilities")) or {},
        instructions=_text(result.get("instructions")),
    )


def initialize_params(
    version: str, capabilities: Mapping[str, Any], info: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The params of our ``initialize`` request."""
    return {
        "protocolVersion": version,
        "capabilities": dict(capabilities),
        "clientInfo": dict(info) if info is not None else {},
    }
