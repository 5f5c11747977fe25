"""The public surface of mrtr_transports: a few names, each loaded on first use."""

from __future__ import annotations

import importlib
import json
import pydoc
import subprocess
import sys
from importlib import metadata

import mrtr_transports
import pytest
from support.user_program import greet_program

import mrtr_core


def test_every_public_name_resolves_to_its_home() -> None:
    assert sorted(mrtr_transports.__all__) == sorted(mrtr_transports._HOMES)
    for name in mrtr_transports.__all__:
        value = getattr(mrtr_transports, name)
        home = mrtr_transports._HOMES[name]
        assert getattr(importlib.import_module(home), name) is value, name
        if home.startswith("mrtr_transports."):  # defined there, not re-exported
            assert getattr(value, "__module__", home) == home, name
    assert set(mrtr_transports.__all__) <= set(dir(mrtr_transports))


#: What an app author needs, by job; each name comes from ``mrtr_transports``.
AUTHOR_NAMES = {
    "write a tool": {"McpApp", "Context"},
    "ask": {"elicit_form", "elicit_url", "sample", "list_roots", "Ask", "Steps", "Next"},
    "read answers": {"ElicitResult", "CreateMessageResult", "ListRootsResult"},
    "return an error": {"tool_error", "MrtrError"},
    "test": {"TestClient", "accept", "decline", "cancel", "sampled", "roots"},
    "serve": {"serve_stdio", "serve_http", "HttpServer", "serve_ws", "WsServer", "McpAsgi"},
    "call": {"Client", "open_stdio_client", "open_http_client", "open_ws_client"},
}


@pytest.mark.parametrize("job", sorted(AUTHOR_NAMES))
def test_an_app_author_imports_every_name_from_the_package(job: str) -> None:
    assert AUTHOR_NAMES[job] <= set(mrtr_transports.__all__), job


def test_the_cores_names_are_the_cores_own_objects() -> None:
    assert mrtr_transports.elicit_form is mrtr_core.server.elicit_form
    assert mrtr_transports.Ask is mrtr_core.server.Ask
    assert mrtr_transports.ElicitResult is mrtr_core.wire.ElicitResult
    assert mrtr_transports.MrtrError is mrtr_core.MrtrError


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
    assert "anyio" not in before and "trio" not in before
    assert "mrtr_transports.apps.mcp_app" not in before
    # The app framework is on anyio: trio is loaded only by whoever runs on trio.
    assert "anyio" in after and "mrtr_transports.apps.mcp_app" in after
    assert "trio" not in after


def test_help_names_the_package_its_subpackages_and_an_example() -> None:
    text = pydoc.render_doc(mrtr_transports, renderer=pydoc.plaintext)
    assert "pip install 'mrtr[transports]'" in text
    for sub in ("apps", "server", "client", "stores", "cli", "testing"):
        assert f"mrtr_transports.{sub}" in text, sub
    assert "@app.tool" in text and "mrtr serve --http" in text and "mrtr call" in text


def test_the_help_example_registers_its_tool_and_asks_then_answers() -> None:
    namespace: dict[str, object] = {"__name__": "greet"}
    exec(compile(greet_program(), "greet.py", "exec"), namespace)
    app = namespace["app"]
    assert isinstance(app, mrtr_transports.McpApp)
    assert list(app.tools) == ["greet"]
    assert app.tools["greet"].description == "Greets the user by the name they give."


def test_one_version_for_both_packages_and_the_distribution() -> None:
    assert mrtr_transports.__version__ == mrtr_core.__version__ == metadata.version("mrtr")
    assert "__version__" not in mrtr_transports.__all__  # a module attribute, not an API name
