"""Moved: who may talk lives with the endpoint (``mrtr_transports.asgi.policy``)."""

from ...asgi.policy import LOCAL_HOSTS, AccessPolicy, Headers

__all__ = ["LOCAL_HOSTS", "AccessPolicy", "Headers"]
