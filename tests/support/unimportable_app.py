"""``--app support.unimportable_app:app``: a module whose own code fails while it is imported."""

from __future__ import annotations

raise RuntimeError("the app's configuration is missing")
