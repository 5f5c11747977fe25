"""What an input request needs the client to have declared: the one capability check.

Used for an ``input_required`` result the client reads (the engine), one a
server builds (asking, the server rules) and a 2025-era server-to-client
request (the server rules, the legacy shim): the needs themselves are the
input-kind registry's entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._convert import unstructure
from ._inputs import INPUT_KINDS, InputRegistry
from ._model import InputRequest

__all__ = ["missing_capability"]


def missing_capability(
    request: InputRequest,
    capabilities: Mapping[str, Any],
    input_kinds: InputRegistry = INPUT_KINDS,
) -> dict[str, Any]:
    """The ``ClientCapabilities`` fragment ``request`` needs but ``capabilities`` lacks.

    Empty when the request is allowed.  The registry entry of the request's kind
    says what it needs: elicitation ``{}`` means form only; URL mode needs ``url``;
    sampling with ``tools``/``toolChoice`` needs ``sampling.tools``, with
    ``includeContext`` other than ``"none"`` ``sampling.context``.
    """
    kind = input_kinds.kind_for(request)
    # Only params-dependent needs read the params: spare the others the unstructuring.
    params = unstructure(request) if kind.param_needs is not None else {}
    return kind.missing_capabilities(params, capabilities)
