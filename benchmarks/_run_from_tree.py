"""Run a module of mrtr from another source tree: ``python _run_from_tree.py TREE MODULE ARGS``.

For before/after figures in one run (``bench_http.py --baseline TREE``): TREE is a
checkout (or ``git archive``) of another commit; its ``mrtr_core`` and ``transports``
(as ``mrtr_transports``) are imported instead of the installed ones.
"""

from __future__ import annotations

import importlib.util
import runpy
import sys

tree, module = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
# The editable install's finder would map the names to this checkout: drop it.
sys.meta_path[:] = [finder for finder in sys.meta_path if "editable" not in repr(finder)]
sys.path.insert(0, tree)
spec = importlib.util.spec_from_file_location(
    "mrtr_transports",
    f"{tree}/transports/__init__.py",
    submodule_search_locations=[f"{tree}/transports"],
)
assert spec is not None and spec.loader is not None
package = importlib.util.module_from_spec(spec)
sys.modules["mrtr_transports"] = package
spec.loader.exec_module(package)
runpy.run_module(module, run_name="__main__", alter_sys=True)
