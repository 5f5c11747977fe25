"""Finding the app to serve: ``--app MODULE:ATTR`` or ``--app path/to/file.py:ATTR``.

The model.  An app is named the way a user has it at hand, and both ways behave as
``python`` itself would:

* ``MODULE:ATTR`` (``greet:app``, ``mypackage.server:app``) imports ``MODULE`` with
  the current folder searched first, as ``python -m`` does.  (A console script such
  as ``mrtr`` puts only its own folder on ``sys.path``, so without this ``greet:app``
  run from greet.py's own folder was "No module named 'greet'".)
* ``FILE.py:ATTR`` (``greet.py:app``, ``path/to/greet.py:app``: a name ending in
  ``.py`` or holding a path separator) runs that file as module ``__mrtr_app__`` with
  its folder searched first, as ``python path/to/greet.py`` would, so the file's own
  sibling imports work.

``ATTR`` may be dotted (``module:holder.app``); when it names a class or a factory
rather than an app, it is called with no arguments.  Whatever does not work is an
:class:`AppSpecError` whose message says what to fix; an exception raised by the
module's own code while it is imported passes through (the caller reports it).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

from ..server.app import ServerApp

__all__ = ["AppSpecError", "load_app"]

#: The module name a file given by path is imported as.
FILE_MODULE = "__mrtr_app__"


class AppSpecError(ValueError):
    """``--app`` does not name a ServerApp; the message says why."""


def load_app(spec: str) -> ServerApp:
    """The ``ServerApp`` that ``spec`` (``MODULE:ATTR`` or ``FILE.py:ATTR``) names."""
    where, sep, attr_path = spec.rpartition(":")
    if not sep or not where or not attr_path or attr_path.startswith(("/", "\\")):
        raise AppSpecError(
            f"--app {spec!r}: expected MODULE:ATTR or FILE.py:ATTR, e.g. greet.py:app"
        )
    if where.endswith(".py") or os.sep in where or "/" in where:
        target: Any = _import_file(spec, where)
    else:
        target = _import_module(spec, where)
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise AppSpecError(
                f"--app {spec!r}: {type(target).__name__} {where!r} has no attribute {part!r}"
            ) from exc
    if not _looks_like_app(target) and callable(target):
        target = target()  # a class or a factory
    if not _looks_like_app(target):
        raise AppSpecError(
            f"--app {spec!r} is a {type(target).__name__}, not a ServerApp: it needs `info`, "
            "`capabilities`, `instructions` and `async def handle(request, info, outlet)`"
        )
    app: ServerApp = target
    return app


def _import_module(spec: str, name: str) -> Any:
    _search_first(os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
            raise  # the module was found; something it imports was not: its own failure
        raise AppSpecError(
            f"--app {spec!r}: cannot import module {name!r}: {exc} (run from the folder "
            f"that holds it, put that folder on PYTHONPATH, or give the file: path/to/file.py:ATTR)"
        ) from exc


def _import_file(spec: str, path: str) -> Any:
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise AppSpecError(f"--app {spec!r}: no such file {path!r}")
    if not full.endswith(".py"):
        raise AppSpecError(f"--app {spec!r}: {path!r} is not a .py file")
    _search_first(os.path.dirname(full))
    module_spec = importlib.util.spec_from_file_location(FILE_MODULE, full)
    assert module_spec is not None and module_spec.loader is not None  # (a .py file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[FILE_MODULE] = module  # as for __main__: dataclasses, pickling look it up
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(FILE_MODULE, None)
        raise
    return module


def _search_first(folder: str) -> None:
    if folder not in sys.path[:1]:
        sys.path.insert(0, folder)


def _looks_like_app(obj: Any) -> bool:
    return (
        not isinstance(obj, type)
        and callable(getattr(obj, "handle", None))
        and all(hasattr(obj, name) for name in ("info", "capabilities", "instructions"))
    )
