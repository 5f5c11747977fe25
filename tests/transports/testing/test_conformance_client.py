"""The official conformance suite's client leg against our conformance client.

The suite starts a mock server per scenario and runs our entry as
``<command> <url>``; its checks judge what our client sent.  Run here: every
non-auth client scenario of protocol 2026-07-28 (``sep-2322-client-request-state``'s
checks named one by one), then every non-auth one of 2025-11-25 (its mock
servers are 2025 servers: the client's era probe must fall back to a 2025
session, and ``sse-retry`` checks the resumption of a stream the server
closed).  The lists come from the suite's own ``list``, so a scenario added to
the pinned suite is run too.  Goal: zero failures, zero warnings.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from support.conformance_suite import (
    CLIENT_SCRIPT,
    SPEC_VERSION,
    SuiteRun,
    listed_client_scenarios,
    run_suite,
    runs_summary,
)

COMMAND = f"{sys.executable} {CLIENT_SCRIPT}"
#: The scenarios the issue names; the suite's list must contain at least these.
NAMED = {
    "sep-2322-client-request-state",
    "request-metadata",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
    "tools_call",
}
REQUEST_STATE_CHECKS = {
    "sep-2322-client-request-state-echoed",
    "sep-2322-client-jsonrpc-id-different",
    "sep-2322-client-no-state-omitted",
    "sep-2322-client-parallel-isolation",
    "sep-2322-default-result-type-complete",
}


def client_scenarios(spec_version: str = SPEC_VERSION) -> list[str]:
    """The suite's client scenarios for ``spec_version``, the ``auth/`` ones left out
    (their own leg: ``test_conformance_client_auth.py``)."""
    return listed_client_scenarios(spec_version, auth=False)


def run_client(scenario: str, output_dir, spec_version: str = SPEC_VERSION) -> SuiteRun:
    args = ["client", "--command", COMMAND, "--scenario", scenario]
    return run_suite([*args, "--spec-version", spec_version], output_dir, timeout=120)


def test_every_non_auth_2026_client_scenario(tmp_path):
    scenarios = client_scenarios()
    assert set(scenarios) >= NAMED, scenarios
    runs = _every_scenario_passes(scenarios, tmp_path, SPEC_VERSION)
    request_state = runs["sep-2322-client-request-state"]
    succeeded = {check["id"] for check in request_state.checks if check["status"] == "SUCCESS"}
    assert succeeded >= REQUEST_STATE_CHECKS, request_state.stderr[-3000:]


#: The 2025-11-25 client scenarios the pinned suite has (it may add more).
NAMED_2025 = {
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "json-schema-2020-12-preservation",
}


def test_every_non_auth_2025_client_scenario(tmp_path):
    scenarios = client_scenarios("2025-11-25")
    assert set(scenarios) >= NAMED_2025, scenarios
    _every_scenario_passes(scenarios, tmp_path, "2025-11-25")


def _every_scenario_passes(
    scenarios: list[str], tmp_path, spec_version: str
) -> dict[str, SuiteRun]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = list(
            pool.map(lambda name: run_client(name, tmp_path / name, spec_version), scenarios)
        )
    line = runs_summary("client leg", runs)
    print(line)
    problems = [p for run in runs for p in run.problems()]
    failed_runs = [
        f"{name}: exit {run.returncode}\n{run.stderr[-2000:]}"
        for name, run in zip(scenarios, runs, strict=True)
        if run.returncode != 0
    ]
    assert problems == [] and failed_runs == [], "\n".join([line, *problems, *failed_runs])
    for name, run in zip(scenarios, runs, strict=True):
        assert run.count("SUCCESS") > 0, f"{name}: no check passed (all skipped?)"
    return dict(zip(scenarios, runs, strict=True))
