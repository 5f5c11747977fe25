"""The wire, for code that builds or reads MCP messages itself: the MRTR payload
types an input request and its answer carry, their conversion, the ``_meta`` keys
every 2026-07-28 request carries, the input-kind registry, the JSON codec and
newline framing.

Everything here is pure: bytes and mappings in, objects out.  The JSON-RPC
envelopes (``Request``, ``ResultResponse``, ...) are at the top level of
``mrtr_core``; the HTTP and WebSocket bindings have their own modules.
"""

from .._meta import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
)
from ._codec import Codec, JsonBackend, message_to_json
from ._convert import structure, structure_input_request, structure_input_required, unstructure
from ._framing import END_OF_STREAM, LineFramer, Oversize
from ._inputs import INPUT_KINDS, InputKind, InputRegistry
from ._model import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    Root,
)

__all__ = [
    # the payloads of a round
    "CreateMessageRequest",
    "CreateMessageResult",
    "ElicitFormRequest",
    "ElicitResult",
    "ElicitUrlRequest",
    "InputRequest",
    "InputRequiredResult",
    "InputResponse",
    "ListRootsRequest",
    "ListRootsResult",
    "Root",
    "structure",
    "structure_input_request",
    "structure_input_required",
    "unstructure",
    # the _meta keys
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    # the input kinds
    "INPUT_KINDS",
    "InputKind",
    "InputRegistry",
    # JSON and framing
    "Codec",
    "JsonBackend",
    "message_to_json",
    "END_OF_STREAM",
    "LineFramer",
    "Oversize",
]
