"""The official conformance suite's 2026-07-28 server leg against ``McpAsgi`` under a real
ASGI server (hypercorn's trio worker, a subprocess on 127.0.0.1), serving the same app and
held to the same bar as ``mrtr serve --http`` (tests/transports/testing/test_conformance_server.py):
every check passes, none warns, none is skipped."""

from __future__ import annotations

from pathlib import Path

from support.asgi_servers import serving
from support.conformance_suite import SPEC_VERSION, require_suite, run_suite

#: What the reference Python SDK server passes with this suite version (as for
#: ``mrtr serve --http``).
REFERENCE_PASSED = 152


def test_the_2026_server_leg_passes_every_check_under_hypercorn(tmp_path: Path) -> None:
    require_suite()  # fails with "run `make conformance-deps`" when the suite is missing
    with serving("hypercorn-trio", "support.asgi_conformance:app", tmp_path / "server.log") as base:
        args = ["server", "--url", f"{base}/mcp", "--suite", "all", "--spec-version", SPEC_VERSION]
        run = run_suite(args, tmp_path / "checks", timeout=240)
    summary = run.summary(f"ASGI server leg {SPEC_VERSION}")
    print(summary)
    assert run.checks, f"the suite wrote no checks:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert run.count("FAILURE") == 0 and run.count("WARNING") == 0, "\n".join(
        [summary, *run.problems()]
    )
    assert run.count("SKIPPED") == 0, [c["id"] for c in run.checks if c["status"] == "SKIPPED"]
    assert run.count("SUCCESS") >= REFERENCE_PASSED, summary
    assert run.returncode == 0, run.stderr[-3000:]
