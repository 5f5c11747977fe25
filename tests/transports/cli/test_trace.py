"""The NDJSON tracer of ``mrtr call --trace``: lines, the requestState echo check, redaction."""

from __future__ import annotations

import io
import json
from typing import Any

import attrs
from mrtr_transports.cli import trace as tr


@attrs.frozen
class Record:
    """The shape of the client's TraceRecord (the tracer reads these five fields)."""

    dir: str
    t: float
    flow: int | None
    round: int | None
    msg: dict[str, Any]


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def leg(rid: int, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "w", **params}}


def asked(rid: int, state: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required", "inputRequests": {}}
    if state is not None:
        result["requestState"] = state
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def done(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": []}}


def test_each_record_is_one_flushed_json_line_with_time_since_start(tmp_path):
    path = tmp_path / "trace.ndjson"
    tracer = tr.NdjsonTracer.open(str(path), start=100.0)
    tracer(Record("send", 100.25, 3, None, leg(1)))
    # Flushed as written: a trace of a call that hangs is still readable.
    first = json.loads(path.read_text())
    assert first == {"dir": "send", "t": 0.25, "flow": 3, "round": None, "msg": leg(1)}
    tracer(Record("recv", 101.5, 3, 1, done(1)))
    tracer.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["dir"] for r in records] == ["send", "recv"]
    assert records[1]["t"] == 1.5 and records[1]["round"] == 1
    assert all("warning" not in r for r in records)


def test_without_a_start_time_counts_from_the_first_record():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out)
    tracer(Record("send", 7.0, None, None, leg(1)))
    tracer(Record("recv", 9.0, None, None, done(1)))
    assert [r["t"] for r in lines(out)] == [0.0, 2.0]


def test_a_faithful_echo_is_not_flagged():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    tracer(Record("send", 0.1, 1, None, leg(1)))
    tracer(Record("recv", 0.2, 1, None, asked(1, "s-1")))
    tracer(Record("send", 0.3, 1, 1, leg(2, requestState="s-1", inputResponses={})))
    tracer(Record("recv", 0.4, 1, 1, asked(2)))  # the next round carries no state
    tracer(Record("send", 0.5, 1, 2, leg(3, inputResponses={})))
    tracer(Record("recv", 0.6, 1, 2, done(3)))
    assert all("warning" not in r for r in lines(out))
    assert tracer.warnings == []


def test_a_changed_echo_is_flagged_on_the_leg_that_carries_it():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    tracer(Record("send", 0.1, 1, None, leg(1)))
    tracer(Record("recv", 0.2, 1, None, asked(1, "abc")))
    tracer(Record("send", 0.3, 1, 1, leg(2, requestState="abd")))
    records = lines(out)
    assert records[2]["warning"] == "requestState echo differs from the one received"
    assert "warning" not in records[0] and "warning" not in records[1]
    assert tracer.warnings == [tr.WARN_ECHO_DIFFERS]


def test_a_dropped_echo_and_an_invented_state_are_flagged():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    tracer(Record("recv", 0.1, 1, None, asked(1, "abc")))
    tracer(Record("send", 0.2, 1, 1, leg(2, inputResponses={})))  # state dropped
    tracer(Record("recv", 0.3, 2, None, asked(5)))  # flow 2: no state in its result
    tracer(Record("send", 0.4, 2, 1, leg(6, requestState="made-up")))
    assert [r.get("warning") for r in lines(out)] == [
        None,
        tr.WARN_ECHO_MISSING,
        None,
        tr.WARN_ECHO_INVENTED,
    ]


def test_state_leaking_into_a_request_outside_any_flow_is_flagged():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    tracer(Record("send", 0.1, None, None, leg(9, requestState="abc")))
    tracer(Record("send", 0.2, None, None, leg(10, inputResponses={"k": {}})))
    tracer(Record("send", 0.3, None, None, leg(11)))
    assert [r.get("warning") for r in lines(out)] == [tr.WARN_LEAK, tr.WARN_LEAK, None]


def test_a_response_recorded_without_its_flow_is_matched_by_its_leg_id():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    tracer(Record("send", 0.1, 4, None, leg(21)))
    tracer(Record("recv", 0.2, None, None, asked(21, "xyz")))
    tracer(Record("send", 0.3, 4, 1, leg(22, requestState="xyz!")))
    records = lines(out)
    assert records[1]["flow"] == 4
    assert records[2]["warning"] == tr.WARN_ECHO_DIFFERS


def test_a_finished_flow_is_forgotten():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    tracer(Record("recv", 0.1, 1, None, asked(1, "abc")))
    tracer(Record("recv", 0.2, 1, None, done(2)))
    # A handle reused for a new call starts fresh: its first leg has no state to echo.
    tracer(Record("send", 0.3, 1, None, leg(3)))
    assert "warning" not in lines(out)[2]


def test_the_flow_memory_is_bounded():
    tracer = tr.NdjsonTracer(io.StringIO(), start=0.0, max_flows=3)
    for flow in range(10):
        tracer(Record("send", 0.0, flow, None, leg(100 + flow)))
        tracer(Record("recv", 0.0, flow, None, asked(100 + flow, f"s{flow}")))
    assert len(tracer._expected) == 3 and len(tracer._flow_of_id) <= 3
    assert set(tracer._expected) == {7, 8, 9}


def test_credentials_are_redacted_and_everything_else_kept():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    message = leg(
        1,
        requestState="state?token=kept-as-is",
        inputResponses={
            "login": {
                "action": "accept",
                "content": {"user": "ada", "password": "hunter2", "db_password": "pw"},
            }
        },
        arguments={
            "Authorization": "Bearer abc.def",
            "x-api-key": "k-123",
            "clientSecret": "cs",
            "note": "use Bearer abc.def or Basic dXNlcjpwdw== please",
            "url": "https://ada:s3cret@example.com/cb?code=XYZ&state=ok&access_token=T",
            "progressToken": 5,
            "maxTokens": 100,
            "nested": [{"token": "t"}, {"refresh_token": "r"}, "plain"],
        },
    )
    tracer(Record("send", 0.1, None, None, message))
    written = out.getvalue()
    for secret in ("hunter2", '"pw"', "abc.def", "dXNlcjpwdw", "k-123", '"cs"', "s3cret", "XYZ"):
        assert secret not in written, secret
    record = lines(out)[0]
    params = record["msg"]["params"]
    content = params["inputResponses"]["login"]["content"]
    assert content == {"user": "ada", "password": "[REDACTED]", "db_password": "[REDACTED]"}
    args = params["arguments"]
    assert args["Authorization"] == args["x-api-key"] == args["clientSecret"] == "[REDACTED]"
    assert args["note"] == "use Bearer [REDACTED] or Basic [REDACTED] please"
    assert args["url"] == (
        "https://ada:[REDACTED]@example.com/cb?code=[REDACTED]&state=ok&access_token=[REDACTED]"
    )
    assert args["progressToken"] == 5 and args["maxTokens"] == 100
    assert args["nested"] == [{"token": "[REDACTED]"}, {"refresh_token": "[REDACTED]"}, "plain"]
    assert params["requestState"] == "state?token=kept-as-is"
    # The original message is not modified.
    assert message["params"]["inputResponses"]["login"]["content"]["password"] == "hunter2"


def test_the_echo_check_compares_the_messages_before_redaction():
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    tracer(Record("recv", 0.1, 1, None, asked(1, "Bearer one")))
    tracer(Record("send", 0.2, 1, 1, leg(2, requestState="Bearer two")))
    assert lines(out)[1]["warning"] == tr.WARN_ECHO_DIFFERS


def test_credential_names():
    for name in ("Authorization", "set-cookie", "API_KEY", "githubApiKey", "private_key"):
        assert tr.is_credential_name(name), name
    for name in ("progressToken", "maxTokens", "requestState", "keyboard", "author", "tokens"):
        assert not tr.is_credential_name(name), name


def test_oauth_secrets_are_redacted_wherever_a_message_carries_them():
    """A token response, an authorization response, a token request's form and an
    ``Authorization`` header, pasted into a message, show none of their secrets."""
    out = io.StringIO()
    tracer = tr.NdjsonTracer(out, start=0.0)
    message = leg(
        1,
        arguments={
            "response": {
                "access_token": "AT-1",
                "token_type": "Bearer",
                "refresh_token": "RT-1",
                "id_token": "IT-1",
                "expires_in": 3600,
            },
            "redirect": "http://127.0.0.1:5000/callback?code=CODE-1&state=st&iss=https://as",
            "fragment": "http://127.0.0.1:5000/callback#code=CODE-2&state=st",
            "form": "code=CODE-3&code_verifier=VER-1&client_secret=CS-1&grant_type=x",
            "refresh": "grant_type=refresh_token&refresh_token=RT-2&client_assertion=CA-1",
            "header": "Authorization: Bearer AT-2",
            "pkce": {"code_verifier": "VER-2", "client_assertion": "CA-2"},
        },
    )
    tracer(Record("send", 0.1, None, None, message))
    written = out.getvalue()
    for secret in ("AT-1", "RT-1", "IT-1", "CODE-1", "CODE-2", "CODE-3", "VER-1", "CS-1"):
        assert secret not in written, secret
    for secret in ("RT-2", "CA-1", "AT-2", "VER-2", "CA-2"):
        assert secret not in written, secret
    args = lines(out)[0]["msg"]["params"]["arguments"]
    assert args["response"]["token_type"] == "Bearer" and args["response"]["expires_in"] == 3600
    assert args["redirect"].endswith("state=st&iss=https://as")  # (state and iss are no secrets)
    assert args["form"].endswith("&grant_type=x")
