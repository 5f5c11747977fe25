"""A server app that writes to stdout: ``--app support.noisy_app:app`` for the serve entry.

It prints at import time and in its ``shout`` tool, with ``print`` and with a
raw write to file descriptor 1 (as a C library or a child process would).
Served over stdio, none of it may reach the protocol stream: all of it must
land on stderr.
"""

from __future__ import annotations

import os
import sys

from mrtr_transports.apps.mcp_app import McpApp

print("noisy: print at import")
sys.stdout.flush()
os.write(1, b"noisy: fd 1 at import\n")

app = McpApp("noisy", "1.0")


@app.tool("shout", description="Prints to stdout, then answers")
def shout(ctx: object) -> str:
    print("noisy: print in a tool", flush=True)
    os.write(1, b"noisy: fd 1 in a tool\n")
    return "quiet on the protocol"
