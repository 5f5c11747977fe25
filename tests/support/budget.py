"""Hypothesis budgets relative to the loaded profile (see ``tests/conftest.py``).

A property test that needs more examples than the profile's budget (or fewer) says how
many times that budget it runs, never a fixed count: the ``quick`` profile of a local
run scales every such test down alike, and ``ci`` runs the full budgets.
"""

from hypothesis import settings


def examples(*, times: float) -> int:
    """``times`` the loaded profile's ``max_examples``, at least one."""
    return max(1, round(settings.default.max_examples * times))
