"""A 2026-07-28-only stdio server: the test app served with ``versions=("2026-07-28",)``.

``python tests/support/modern_only_stdio.py``.  It refuses ``initialize`` with an
error naming the versions it speaks (what the spec says such a server should do),
so a client that remembered a 2025 session with it must probe again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: `support` importable

from mrtr_transports.server.stdio import serve_stdio

import mrtr_core as m
from support.srv_apps import TestApp

if __name__ == "__main__":
    trio.run(lambda: serve_stdio(TestApp(), versions=m.MODERN_VERSIONS))
