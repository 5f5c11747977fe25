"""Moved: one 2025-era session lives with the endpoint (``mrtr_transports.asgi.session``)."""

from ...asgi.session import Session, SessionOutlet

__all__ = ["Session", "SessionOutlet"]
