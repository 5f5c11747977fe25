"""The server's side of a round: typed asks and reading the answers, the sealed
``requestState``, the handler styles, and the shim that serves 2025-era
clients with the same handlers.  See ``docs/server.md``.
"""

from ._asking import (
    Answers,
    CapabilityRequired,
    InvalidAnswer,
    elicit_form,
    elicit_url,
    input_required,
    list_roots,
    required_capabilities,
    sample,
)
from ._handlers import Ask, Handler, HandlerContext, Next, Steps, close_leg, open_leg, run_handler
from ._legacy_shim import (
    LegacyShim,
    ShimDone,
    ShimEvent,
    ShimRun,
    ShimSend,
    ShimWait,
    legacy_request,
)
from ._sealing import (
    REQUEST_STATE_REASONS,
    InvalidRequestState,
    MemoryNonceStore,
    NonceStore,
    NonceStoreFull,
    OpenedState,
    StateSealer,
    params_digest,
)

__all__ = [
    "Answers",
    "CapabilityRequired",
    "InvalidAnswer",
    "elicit_form",
    "elicit_url",
    "input_required",
    "list_roots",
    "required_capabilities",
    "sample",
    "Ask",
    "Handler",
    "HandlerContext",
    "Next",
    "Steps",
    "close_leg",
    "open_leg",
    "run_handler",
    "LegacyShim",
    "ShimDone",
    "ShimEvent",
    "ShimRun",
    "ShimSend",
    "ShimWait",
    "legacy_request",
    "REQUEST_STATE_REASONS",
    "InvalidRequestState",
    "MemoryNonceStore",
    "NonceStore",
    "NonceStoreFull",
    "OpenedState",
    "StateSealer",
    "params_digest",
]
