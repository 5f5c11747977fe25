"""The official conformance suite's client ``auth/`` scenarios against our conformance
client and its OAuth provider (``mrtr_transports.client.oauth``).

Each scenario starts a mock MCP server and a mock authorization server and judges
what our client sent: discovery (four metadata layouts), CIMD, scope selection and
step-up with its retry limit, the three token endpoint auth methods,
pre-registration, a resource mismatch, offline access, an authorization-server
migration, the six RFC 9207 ``iss`` cases and a metadata issuer mismatch.  The list
comes from the suite's own ``list`` (every ``auth/`` client scenario of 2026-07-28),
so one added to the pinned suite is run too.  Goal: zero failures, zero warnings,
and the suite's own verdict (its exit status) a pass.  Of the extension scenarios,
the two client credentials ones pass (a machine client, by secret or by signed JWT),
the two DPoP ones (RFC 9449: a DPoP-bound token, a fresh proof on each request,
the authorization server's and the resource's nonces), workload identity (a JWT-bearer
grant with the workload's JWT) and enterprise-managed authorization (an ID-JAG from
the identity provider's token exchange, then the JWT-bearer grant).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.conformance_suite import (
    AUTH_CLIENT_SCENARIOS,
    AUTH_REFUSALS,
    CLIENT_SCRIPT,
    SPEC_VERSION,
    SuiteRun,
    listed_client_scenarios,
    run_suite,
    runs_summary,
)

#: The 25 the issue counts; the suite's list must contain at least these.
NAMED = set(AUTH_CLIENT_SCENARIOS)


COMMAND = f"{sys.executable} {CLIENT_SCRIPT}"


def run_client(scenario: str, output_dir, *, extension: bool = False) -> SuiteRun:
    args = ["client", "--command", COMMAND, "--scenario", scenario]
    version = [] if extension else ["--spec-version", SPEC_VERSION]
    return run_suite([*args, *version], output_dir, timeout=120)


def test_every_2026_auth_client_scenario(tmp_path):
    scenarios = listed_client_scenarios(SPEC_VERSION, auth=True)
    assert set(scenarios) >= NAMED, sorted(NAMED - set(scenarios))
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda name: run_client(name, tmp_path / name), scenarios))
    line = runs_summary("client auth leg", runs)
    print(line)
    problems = [p for run in runs for p in run.problems()]
    failed = [
        f"{name}: suite exit {run.returncode}\n{run.stderr[-2500:]}"
        for name, run in zip(scenarios, runs, strict=True)
        if run.returncode != 0
    ]
    assert problems == [] and failed == [], "\n".join([line, *problems, *failed])
    by_name = dict(zip(scenarios, runs, strict=True))
    for name, check in AUTH_REFUSALS.items():
        statuses = {c["status"] for c in by_name[name].checks if c.get("id") == check}
        assert statuses == {"SUCCESS"}, (name, check, statuses)
    for name, run in by_name.items():
        assert run.count("SUCCESS") > 0, f"{name}: no check passed"


@pytest.mark.parametrize(
    ("scenario", "check"),
    [
        ("auth/client-credentials-basic", "client-credentials-basic-auth"),
        ("auth/client-credentials-jwt", "client-credentials-jwt-verified"),
        ("auth/wif-jwt-bearer", "wif-assertion-verified"),
        ("auth/enterprise-managed-authorization", "complete-flow-jwt-bearer"),
    ],
)
def test_the_machine_client_extension_scenarios(scenario, check, tmp_path):
    run = run_client(scenario, tmp_path, extension=True)
    assert run.problems() == [], "\n".join(run.problems()) + "\n" + run.stderr[-2500:]
    succeeded = {c["id"] for c in run.checks if c["status"] == "SUCCESS"}
    assert check in succeeded, run.stderr[-2500:]
    assert run.returncode == 0, run.stderr[-2500:]


DPOP_CHECKS = {
    "sep-1932-client-token-request-proof",
    "sep-1932-client-dpop-auth-scheme",
    "sep-1932-client-fresh-proof",
}


@pytest.mark.parametrize(
    ("scenario", "checks"),
    [
        ("auth/dpop", DPOP_CHECKS),
        ("auth/dpop-nonce", DPOP_CHECKS | {"sep-1932-client-as-nonce", "sep-1932-client-rs-nonce"}),
    ],
)
def test_the_dpop_extension_scenarios(scenario, checks, tmp_path):
    run = run_client(scenario, tmp_path, extension=True)
    assert run.problems() == [], "\n".join(run.problems()) + "\n" + run.stderr[-2500:]
    succeeded = {c["id"] for c in run.checks if c["status"] == "SUCCESS"}
    assert checks <= succeeded, (checks - succeeded, run.stderr[-2500:])
    assert run.returncode == 0, run.stderr[-2500:]
