"""Moved: the URL-elicitation callback lives with the endpoint (``asgi/callback.py``)."""

from ...asgi.callback import (
    CURRENT_CALLBACK_URL,
    DEFAULT_CALLBACK_PATH,
    CallbackRoute,
    CallbackTarget,
    callback_route,
)

__all__ = [
    "CURRENT_CALLBACK_URL",
    "DEFAULT_CALLBACK_PATH",
    "CallbackRoute",
    "CallbackTarget",
    "callback_route",
]
