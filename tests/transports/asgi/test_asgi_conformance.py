"""The official conformance suite's server legs against ``McpAsgi`` under real ASGI servers
(uvicorn on asyncio, hypercorn's trio worker: subprocesses on 127.0.0.1), serving the same
app and held to the same bar as ``mrtr serve --http``
(tests/transports/testing/test_conformance_server.py): 2026-07-28, and 2025-11-25
(sessions, the legacy shim's server-to-client requests, SSE resumption) on the same
endpoint; every check passes, none warns, none is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.asgi_servers import SERVERS, serving
from support.conformance_suite import SPEC_VERSION, require_suite, run_suite

#: What the reference Python SDK server passes with this suite version, by revision (as
#: for ``mrtr serve --http``).
REFERENCE_PASSED = {SPEC_VERSION: 152, "2025-11-25": 84}


@pytest.mark.parametrize("version", sorted(REFERENCE_PASSED))
@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_server_legs_pass_every_check(server: str, version: str, tmp_path: Path) -> None:
    require_suite()  # fails with "run `make conformance-deps`" when the suite is missing
    with serving(server, "support.asgi_conformance:app", tmp_path / "server.log") as base:
        args = ["server", "--url", f"{base}/mcp", "--suite", "all", "--spec-version", version]
        run = run_suite(args, tmp_path / "checks", timeout=240)
    summary = run.summary(f"ASGI server leg {version} under {server}")
    print(summary)
    assert run.checks, f"the suite wrote no checks:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert run.count("FAILURE") == 0 and run.count("WARNING") == 0, "\n".join(
        [summary, *run.problems()]
    )
    assert run.count("SKIPPED") == 0, [c["id"] for c in run.checks if c["status"] == "SKIPPED"]
    assert run.count("SUCCESS") >= REFERENCE_PASSED[version], summary
    assert run.returncode == 0, run.stderr[-3000:]
