"""`make demo`: a two-round tool call over a real stdio subprocess, with bundled answers.

It runs the `mrtr` command as a user would:

    mrtr call --answers examples/demo_answers.json --trace TRACE \
        "stdio:mrtr serve --stdio" plan_trip '{"destination": "Lisbon"}'

`mrtr call` starts the example server (`mrtr serve --stdio`) as a child
process, probes `server/discover`, calls `plan_trip`, answers the two rounds
of questions from the answers file (who travels, then for how long), echoes
the sealed `requestState` on each retry, and prints the result. The demo
then prints the transcript from the trace: every message, in order.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MRTR = [sys.executable, "-m", "mrtr_transports.cli.main"]


def short(message: dict[str, Any]) -> str:
    """One line per message, without the `_meta` every 2026 message carries and with the
    sealed requestState shortened: what changes from leg to leg stays readable."""

    def trim(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (f"<sealed, {len(v)} chars>" if k == "requestState" else trim(v))
                for k, v in value.items()
                if k != "_meta"
            }
        return [trim(v) for v in value] if isinstance(value, list) else value

    text = json.dumps(trim(message), separators=(",", ":"))
    return text if len(text) <= 300 else text[:297] + "..."


def main() -> int:
    server = shlex.join([*MRTR, "serve", "--stdio"])
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.ndjson"
        command = [
            *MRTR,
            "call",
            "--answers",
            str(HERE / "demo_answers.json"),
            "--trace",
            str(trace),
            "--timeout",
            "30",
            f"stdio:{server}",
            "plan_trip",
            json.dumps({"destination": "Lisbon"}),
        ]
        print("$ mrtr call --answers examples/demo_answers.json --trace TRACE \\")
        print('    "stdio:mrtr serve --stdio" plan_trip \'{"destination": "Lisbon"}\'\n')
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        records = [json.loads(line) for line in trace.read_text().splitlines()]
    print("transcript (the client's --trace; the _meta every message carries is left out):")
    for record in records:
        arrow = "->" if record["dir"] == "send" else "<-"
        where = f"flow {record['flow']} round {record['round']}" if record["flow"] else "session"
        print(f"  {record['t']:7.3f}s {arrow} [{where}] {short(record['msg'])}")
    if done.returncode != 0:
        print(f"mrtr call exited {done.returncode}:\n{done.stderr}", file=sys.stderr)
        return 1
    result = json.loads(done.stdout)
    text = result["content"][0]["text"]
    print(f"\nresult (stdout of mrtr call, exit 0): {text}")
    retries = [
        r["msg"]
        for r in records
        if r["dir"] == "send" and "requestState" in (r["msg"].get("params") or {})
    ]
    assert text == "Trip to Lisbon for Ada: 3 nights.", text
    assert len(retries) == 2, "two rounds of questions, so two retries"
    print(f"{len(retries)} retries, each with this round's answers and the echoed requestState")
    return 0


if __name__ == "__main__":
    sys.exit(main())
