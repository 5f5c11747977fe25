"""``never_true``: which folders a ``-m`` expression lets ``tests/conftest.py`` skip importing.

Skipping a folder that holds a selected test would lose that test silently, so the answer
is checked against every set of markers an item can carry.
"""

from __future__ import annotations

from itertools import chain, combinations

import pytest
from _pytest.mark.expression import Expression
from hypothesis import given
from hypothesis import strategies as st
from support.marker_logic import never_true

MAKE_CHECK = "not (slow or subprocess or interop or scale or conformance)"
NAMES = ("slow", "subprocess", "interop", "scale", "conformance", "serial", "anyio")


@pytest.mark.parametrize(
    ("expression", "carried", "skipped"),
    [
        (MAKE_CHECK, {"interop", "subprocess"}, True),
        (MAKE_CHECK, {"scale"}, True),
        (MAKE_CHECK, {"slow", "serial"}, True),
        (MAKE_CHECK, {"conformance", "subprocess"}, True),
        ("not serial", {"slow", "serial"}, True),
        ("not serial", {"interop", "subprocess"}, False),
        ("serial", {"interop", "subprocess"}, False),
        ("interop", {"interop", "subprocess"}, False),
        ("slow and not slow", {"scale"}, True),
        ("anyio or not anyio", {"scale"}, False),
        ("not scale or anyio", {"scale"}, False),
        ("not scale and (slow or serial) and not (slow or serial)", {"scale"}, True),
        ("not scale or (slow and serial and anyio)", {"scale"}, False),
        # a marker with arguments is a question about them: not answered by the folder's
        ("slow(reason=1)", {"slow"}, False),
        ("not slow(reason=1)", {"slow"}, False),
    ],
)
def test_a_folder_is_skipped_only_when_no_item_in_it_can_match(
    expression: str, carried: set[str], skipped: bool
) -> None:
    assert never_true(expression, frozenset(carried)) is skipped


def _expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        st.sampled_from(NAMES),
        lambda inner: st.one_of(
            inner.map(lambda e: f"not {e}"),
            st.tuples(inner, st.sampled_from(("and", "or")), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
        ),
        max_leaves=8,
    )


@given(_expressions(), st.frozensets(st.sampled_from(NAMES), min_size=1))
def test_never_true_agrees_with_every_item_the_folder_can_hold(
    expression: str, carried: frozenset[str]
) -> None:
    others = [name for name in NAMES if name not in carried]
    extras = chain.from_iterable(combinations(others, n) for n in range(len(others) + 1))
    compiled = Expression.compile(expression)
    some_item_matches = any(
        compiled.evaluate(frozenset((*carried, *extra)).__contains__) for extra in extras
    )
    assert never_true(expression, carried) is not some_item_matches
