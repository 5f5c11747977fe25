"""The conformance suite's client, played by the ``mrtr`` command as a person would use it:
``mrtr list --json URL``, then ``mrtr call URL TOOL`` for each tool listed, each a process
of its own sharing one token store (a later command reuses and steps up the token an
earlier one got).  The person's browser is the ``BROWSER`` the test sets (a headless one:
the suite's authorization server asks no one).  The suite runs ``THIS URL``; the scenario's
pre-registered credentials (``MCP_CONFORMANCE_CONTEXT``) become ``--client-id`` and the
client secret's environment variable, never the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

MRTR = [sys.executable, "-m", "mrtr_transports.cli.main"]
#: The Client ID Metadata Document URL the suite's ``auth/basic-cimd`` expects.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def main() -> int:
    url = sys.argv[-1]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    env = dict(os.environ)
    options = ["--client-metadata-url", CLIENT_METADATA_URL, "--timeout", "30"]
    if context.get("client_id"):
        options += ["--client-id", context["client_id"]]
        env["MRTR_CLIENT_SECRET"] = context.get("client_secret") or ""
    listed = subprocess.run(
        [*MRTR, "list", "--json", *options, url], env=env, capture_output=True, text=True
    )
    sys.stderr.write(listed.stderr)
    if listed.returncode != 0:
        return listed.returncode
    for tool in json.loads(listed.stdout)["tools"]:
        called = subprocess.run(
            [*MRTR, "call", *options, url, tool["name"], "{}"],
            env=env,
            capture_output=True,
            text=True,
        )
        sys.stderr.write(called.stderr)
        if called.returncode not in (0, 1):  # (a tool error is the tool's answer)
            return called.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
