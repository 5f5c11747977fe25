"""The WWW-Authenticate Bearer challenge: RFC 9110's grammar (several challenges, token68,
quoted strings), RFC 6750's parameters and RFC 9728's ``resource_metadata``, bounded."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrtr_core as m
from mrtr_core.auth import BearerChallenge, InvalidChallenge
from mrtr_core.auth._challenge import MAX_HEADER_LENGTH, MAX_PARAMS, Challenge, parse_challenges

PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


def test_a_401_of_the_specification_is_read() -> None:
    header = f'Bearer resource_metadata="{PRM}", scope="files:read files:write"'
    challenge = BearerChallenge.from_headers(header)
    assert challenge == BearerChallenge(resource_metadata=PRM, scope=("files:read", "files:write"))


def test_an_insufficient_scope_403_is_read_with_every_rfc6750_parameter() -> None:
    header = (
        'Bearer realm="mcp", error="insufficient_scope", '
        'error_description="needs \\"deploy\\"", error_uri="https://e.x/e", scope=deploy, '
        "x-other=1"
    )
    challenge = BearerChallenge.from_headers([header])
    assert challenge is not None
    assert challenge.realm == "mcp" and challenge.error == "insufficient_scope"
    assert challenge.error_description == 'needs "deploy"'
    assert challenge.error_uri == "https://e.x/e"
    assert challenge.scope == ("deploy",)
    assert challenge.extra == {"x-other": "1"}


def test_the_rfc_9110_example_of_several_challenges_is_read() -> None:
    header = 'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"'
    assert parse_challenges(header) == [
        Challenge(
            scheme="Newauth", params={"realm": "apps", "type": "1", "title": 'Login to "apps"'}
        ),
        Challenge(scheme="Basic", params={"realm": "simple"}),
    ]


def test_token68_challenges_and_empty_ones_are_read() -> None:
    assert parse_challenges("Basic abc==, Bearer") == [
        Challenge(scheme="Basic", token68="abc=="),
        Challenge(scheme="Bearer"),
    ]
    assert parse_challenges(", , Negotiate abc ,") == [Challenge(scheme="Negotiate", token68="abc")]
    assert parse_challenges("Bearer ") == [Challenge(scheme="Bearer")]
    assert parse_challenges("") == []


def test_the_bearer_challenge_is_found_among_others_and_names_are_case_insensitive() -> None:
    found = BearerChallenge.from_headers(['Basic realm="x"', 'bearer REALM="y"'])
    assert found == BearerChallenge(realm="y")
    assert BearerChallenge.from_headers('Basic realm="x"') is None
    assert BearerChallenge.from_headers([]) is None


@pytest.mark.parametrize(
    "header",
    [
        "Bearer realm=",  # a parameter without a value
        'Bearer realm="unterminated',
        "Bearer a=1 b=2",  # parameters not separated by a comma
        'Bearer realm="x", realm="y"',  # a parameter twice
        "=Bearer",  # no scheme
        'Bearer realm="x" junk',
        "Bearer abc, Bearer def",  # token68s are not parameters: two Bearer challenges
    ],
)
def test_a_malformed_header_is_refused(header: str) -> None:
    with pytest.raises(InvalidChallenge) as refused:
        BearerChallenge.from_headers(header)
    assert refused.value.code == m.ErrorCode.INTERNAL_ERROR
    assert isinstance(refused.value, m.RemoteProtocolError)


def test_a_bearer_token68_and_two_bearer_challenges_are_refused() -> None:
    with pytest.raises(InvalidChallenge, match="token68"):
        BearerChallenge.from_headers("Bearer abc==")
    with pytest.raises(InvalidChallenge, match="more than one"):
        BearerChallenge.from_headers(['Bearer realm="a"', 'Bearer realm="b"'])


def test_the_header_is_bounded() -> None:
    with pytest.raises(InvalidChallenge, match="longer than"):
        parse_challenges("Bearer " + "a" * MAX_HEADER_LENGTH)
    many = ", ".join(f"p{i}=1" for i in range(MAX_PARAMS + 1))
    with pytest.raises(InvalidChallenge, match="more than"):
        parse_challenges("Bearer " + many)
    assert len(parse_challenges("Bearer " + many.rsplit(", ", 1)[0])[0].params) == MAX_PARAMS


def test_misuse_is_a_local_protocol_error() -> None:
    with pytest.raises(m.LocalProtocolError):
        parse_challenges(b"Bearer")  # type: ignore[arg-type]
    with pytest.raises(m.LocalProtocolError):
        BearerChallenge(realm="a\r\nSet-Cookie: x=1").to_header()
    with pytest.raises(m.LocalProtocolError):
        BearerChallenge(extra={"bad name": "x"}).to_header()


def test_what_a_server_writes_is_what_a_client_reads() -> None:
    challenge = BearerChallenge(
        realm='say "hi" \\ there',
        scope=("a", "b:c"),
        error="invalid_token",
        error_description="expired",
        error_uri="https://e.x/doc",
        resource_metadata=PRM,
        extra={"x-trace": "t1"},
    )
    header = challenge.to_header()
    assert header.startswith('Bearer realm="say \\"hi\\" \\\\ there", resource_metadata=')
    assert BearerChallenge.from_headers(header) == challenge
    assert BearerChallenge().to_header() == "Bearer"
    assert BearerChallenge.from_headers("Bearer") == BearerChallenge()


TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)
SCOPES = st.lists(st.from_regex(r"[a-z:._-]{1,10}", fullmatch=True), min_size=1, max_size=4)


@given(
    realm=st.none() | TEXT,
    scope=st.none() | SCOPES.map(tuple),
    error=st.none() | TEXT,
    metadata=st.none() | TEXT,
)
def test_any_challenge_round_trips(
    realm: str | None, scope: tuple[str, ...] | None, error: str | None, metadata: str | None
) -> None:
    challenge = BearerChallenge(realm=realm, scope=scope, error=error, resource_metadata=metadata)
    assert BearerChallenge.from_headers(challenge.to_header()) == challenge


@given(st.text(max_size=200))
def test_any_header_is_read_or_refused_with_the_documented_error(header: str) -> None:
    with contextlib.suppress(InvalidChallenge):
        BearerChallenge.from_headers(header)
