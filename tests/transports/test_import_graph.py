"""The import graph of the installed packages: no module imports itself back, and the
server package never imports the command.

A module's *runtime* imports are the ones its body runs when it is imported (not those
under ``if TYPE_CHECKING:``, nor those inside a function, which run later); the graph of
them, between the modules of ``mrtr_core`` and ``mrtr_transports``, must have no cycle:
an app registered by importing a sibling at the bottom of a module (as the example app
once did) is one.
"""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
from pathlib import Path

import pytest

PACKAGES = ("mrtr_core", "mrtr_transports")


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations is not None
        root = spec.submodule_search_locations
        found[package] = Path(spec.origin or "")
        for info in pkgutil.walk_packages(root, prefix=f"{package}."):
            module_spec = importlib.util.find_spec(info.name)
            assert module_spec is not None and module_spec.origin is not None
            found[info.name] = Path(module_spec.origin)
    return found


def _top_level(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements a module's body runs (``if TYPE_CHECKING:`` blocks skipped)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                found += _top_level(node.body) + _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            found += _top_level(node.body)
            for handler in node.handlers:
                found += _top_level(handler.body)
    return found


def runtime_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that importing ``name`` imports at once."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _top_level(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            targets.add(submodule if submodule in known else base)
    return {target for target in targets if target in known and target != name}


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: runtime_imports(name, path, known) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_no_module_imports_itself_back_at_import_time() -> None:
    graph = import_graph()
    assert "mrtr_transports.apps.example" in graph and "mrtr_transports.cli.serve" in graph
    assert cycles(graph) == []


def test_the_checker_sees_a_cycle() -> None:
    # The example app's old shape: example imported example_auth at its end, and
    # example_auth imported example's app.
    graph = {"example": {"example_auth"}, "example_auth": {"example"}, "other": set()}
    assert cycles(graph) == [["example", "example_auth"]]


@pytest.mark.parametrize("layer", ["mrtr_transports.server.", "mrtr_transports.client."])
def test_the_server_and_client_never_import_the_command(layer: str) -> None:
    # `cli` (mrtr serve, mrtr call) is built on the server and the client, not under them:
    # not even lazily, inside a function.
    found = modules()
    for name, path in found.items():
        if not name.startswith(layer):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                assert "cli" not in module.split("."), f"{name} imports {module}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("mrtr_transports.cli"), name


@pytest.mark.parametrize(
    "name", ["conformance_app", "conformance_2025", "conformance_client", "fixture_data"]
)
def test_the_conformance_fixtures_are_not_installed(name: str) -> None:
    # Only the suite and the tests serve them: they live in tests/support/.
    assert importlib.util.find_spec(f"mrtr_transports.testing.{name}") is None
