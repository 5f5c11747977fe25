"""What a Streamable HTTP request's Accept values take (mrtr_core.http._headers.accepted_media)."""

from __future__ import annotations

import pytest

import mrtr_core as m


@pytest.mark.parametrize(
    ("values", "taken"),
    [
        ([], (True, True)),  # no Accept: both
        (["application/json, text/event-stream"], (True, True)),
        (["application/json", "text/event-stream"], (True, True)),  # two headers
        (["Application/JSON"], (True, False)),
        (["text/event-stream"], (False, True)),
        (["*/*"], (True, True)),
        (["application/*"], (True, False)),
        (["text/*"], (False, True)),
        (["text/html"], (False, False)),
        (["application/json;q=0, text/event-stream"], (False, True)),
        (["application/json; q=0.5"], (True, False)),
        (["application/json;q=oops"], (False, False)),  # an unreadable q refuses
        (["application/json;q=nan"], (False, False)),
        (["application/json;charset=utf-8;Q=1"], (True, False)),
        (["application/json;q=-1, */*;q=0"], (False, False)),
    ],
)
def test_accept_values(values: list[str], taken: tuple[bool, bool]) -> None:
    assert m.http._headers.accepted_media(values) == taken
