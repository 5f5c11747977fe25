"""Where ``mrtr serve`` logs: stderr at ``--log-level``; access lines unless ``--no-access-log``."""

from __future__ import annotations

import logging
import sys

from ..server.access import ACCESS_LOGGER

__all__ = ["setup_logging"]


def setup_logging(level: str, *, access_log: bool) -> None:
    """Send logging to stderr at ``level``; without ``access_log`` the per-request
    access lines stay out even at INFO."""
    logging.basicConfig(stream=sys.stderr, level=level)
    if not access_log:
        logging.getLogger(ACCESS_LOGGER).setLevel(logging.WARNING)
