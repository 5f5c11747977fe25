"""The server's side of a round, for server authors on the core: typed asks and
reading the answers, what a server knows of one request (``RequestInfo``), the
handler styles, the sealed ``requestState`` and its single-use store, the shim
that serves 2025-era clients with the same handlers, and URL elicitation through
a provider that redirects back to the server (``docs/url-elicitation.md``).
See ``docs/server.md``.
"""

from .._meta import RequestInfo
from ._asking import (
    Answers,
    CapabilityRequired,
    InvalidAnswer,
    UnprovenAnswer,
    elicit_form,
    elicit_url,
    input_required,
    list_roots,
    required_capabilities,
    sample,
)
from ._handlers import (
    Ask,
    Handler,
    HandlerContext,
    Next,
    Steps,
    close_leg,
    open_leg,
    run_handler,
)
from ._legacy_shim import LegacyShim, ShimDone, ShimEvent, ShimRun, ShimSend, ShimWait
from ._sealing import (
    InvalidRequestState,
    MemoryNonceStore,
    NonceStore,
    NonceStoreFull,
    StateSealer,
)
from ._url_flows import (
    BadCallback,
    Callback,
    Interaction,
    InteractionGone,
    InteractionStatus,
    InteractionStoreFull,
    MemoryInteractions,
    begin_interaction,
    read_callback,
)

__all__ = [
    "RequestInfo",
    # asking, and reading the answers
    "Answers",
    "CapabilityRequired",
    "InvalidAnswer",
    "UnprovenAnswer",
    "elicit_form",
    "elicit_url",
    "input_required",
    "list_roots",
    "required_capabilities",
    "sample",
    # handler styles
    "Ask",
    "Handler",
    "HandlerContext",
    "Next",
    "Steps",
    "close_leg",
    "open_leg",
    "run_handler",
    # 2025-era clients
    "LegacyShim",
    "ShimDone",
    "ShimEvent",
    "ShimRun",
    "ShimSend",
    "ShimWait",
    # sealed requestState
    "InvalidRequestState",
    "MemoryNonceStore",
    "NonceStore",
    "NonceStoreFull",
    "StateSealer",
    # URL elicitation through a provider
    "BadCallback",
    "Callback",
    "Interaction",
    "InteractionGone",
    "InteractionStatus",
    "InteractionStoreFull",
    "MemoryInteractions",
    "begin_interaction",
    "read_callback",
]
