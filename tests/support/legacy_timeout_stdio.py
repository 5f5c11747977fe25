"""The test app over stdio with a short legacy answer timeout (``sys.argv[1]`` seconds).

``python tests/support/legacy_timeout_stdio.py 0.3``: a 2025 client that never answers
the server's question gets -32603 after that long instead of holding the request.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: `support` importable

from mrtr_transports.server.stdio import serve_stdio

from support.srv_apps import TestApp

if __name__ == "__main__":
    timeout = float(sys.argv[1])
    trio.run(lambda: serve_stdio(TestApp(), legacy_answer_timeout=timeout))
