"""The wire: JSON-RPC envelopes and the MRTR payload types, their conversion, the
JSON codec, byte framing and the SSE codec.

For adapters that move messages themselves (an HTTP body, an SSE event, a
WebSocket frame) and for code that needs the typed payloads an input request
or its answer carries.  Everything here is pure: bytes and mappings in,
objects out.
"""

from .._wait import NEED_DATA
from ._codec import (
    STDLIB_JSON,
    Codec,
    JsonBackend,
    decode_message,
    default_codec,
    encode_message,
    json_backend,
    message_from_json,
    message_to_json,
)
from ._convert import (
    structure,
    structure_input_request,
    structure_input_required,
    unstructure,
    unstructure_input_request,
    unstructure_input_required,
    unstructure_input_response,
)
from ._depth import DEFAULT_MAX_DEPTH
from ._framing import END_OF_STREAM, LineFramer, MessageFramer, Oversize
from ._model import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    ErrorObject,
    ErrorResponse,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    Message,
    Notification,
    Request,
    RequestId,
    ResultResponse,
    Root,
    error_response,
)
from ._sse import DEFAULT_MAX_EVENT_SIZE, SseDecoder, SseEvent, encode_sse, encode_sse_comment

__all__ = [
    "END_OF_STREAM",
    "NEED_DATA",
    "LineFramer",
    "MessageFramer",
    "Oversize",
    "STDLIB_JSON",
    "Codec",
    "DEFAULT_MAX_DEPTH",
    "JsonBackend",
    "decode_message",
    "default_codec",
    "encode_message",
    "json_backend",
    "message_from_json",
    "message_to_json",
    "structure",
    "structure_input_request",
    "structure_input_required",
    "unstructure",
    "unstructure_input_request",
    "unstructure_input_required",
    "unstructure_input_response",
    "CreateMessageRequest",
    "CreateMessageResult",
    "ElicitFormRequest",
    "ElicitResult",
    "ElicitUrlRequest",
    "ErrorObject",
    "ErrorResponse",
    "InputRequest",
    "InputRequiredResult",
    "InputResponse",
    "ListRootsRequest",
    "ListRootsResult",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "ResultResponse",
    "Root",
    "error_response",
    "DEFAULT_MAX_EVENT_SIZE",
    "SseDecoder",
    "SseEvent",
    "encode_sse",
    "encode_sse_comment",
]
