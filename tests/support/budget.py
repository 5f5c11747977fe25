"""Hypothesis budgets relative to the loaded profile (see ``tests/conftest.py``).

A property test that needs more examples than the profile's budget (or fewer) says how
many times that budget it runs, never a fixed count: the ``quick`` profile of a local
run scales every such test down alike, and ``ci`` runs the full budgets.
"""

from hypothesis import settings


def examples(*, times: float) -> int:
    """``times`` the loaded profile's ``max_examples``, at least one."""
    return max(1, round(settings.default.max_examples * times))


#: The ``ci`` profile's ``max_examples``: the budget every full count is written for.
FULL_EXAMPLES = 100


def stateful_steps(*, full: int) -> int:
    """A state machine's ``stateful_step_count``: ``full`` under the ``ci`` profile, and
    scaled by the square root of the profile's share of it below (``quick``: 20 of 100
    examples gives 45% of the steps), so a local run still walks deep states, fewer times."""
    share = min(1.0, settings.default.max_examples / FULL_EXAMPLES)
    return max(1, round(full * share**0.5))
