"""The public surface of mrtr_transports: a few names, each loaded on first use."""

from __future__ import annotations

import json
import subprocess
import sys

import mrtr_transports
import pytest


def test_every_public_name_resolves_to_its_home() -> None:
    assert sorted(mrtr_transports.__all__) == sorted(mrtr_transports._HOMES)
    for name in mrtr_transports.__all__:
        value = getattr(mrtr_transports, name)
        home = f"mrtr_transports.{mrtr_transports._HOMES[name]}"
        assert getattr(value, "__module__", home) == home, name
    assert set(mrtr_transports.__all__) <= set(dir(mrtr_transports))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = mrtr_transports.Nope  # type: ignore[attr-defined]


def test_importing_the_package_loads_no_event_loop_until_a_name_is_used() -> None:
    code = (
        "import json, sys\nimport mrtr_transports\nbefore = sorted(sys.modules)\n"
        "mrtr_transports.McpApp\nprint(json.dumps([before, sorted(sys.modules)]))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    before, after = json.loads(ran.stdout)
    assert "trio" not in before and "mrtr_transports.apps.mcp_app" not in before
    assert "trio" in after and "mrtr_transports.apps.mcp_app" in after
