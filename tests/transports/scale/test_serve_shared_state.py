"""``mrtr serve --state-keys ... --single-use ...``: the options that let workers share state.

Usage errors exit 2 with a message that says what to fix (run in-process: they
stop before anything is served).  The served side runs real workers: two
loading the same keys, one from a file and one from an environment variable,
serve the two legs of one flow; a worker whose Redis is unreachable still
starts (with a warning), answers new calls, and refuses every leg that redeems a
state with -32603 rather than serve it unguarded.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from mrtr_transports.cli import serve as serve_command
from mrtr_transports.stores.keys import new_state_keys
from scale_cluster import Flow, Worker, error_reason, text_of
from scale_services import RedisServer, free_port

KEYS = new_state_keys()


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(KEYS)
    return path


def serve(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = serve_command.main(argv)
    return code, capsys.readouterr().err


def test_help_names_the_shared_state_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        serve_command.main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert "--state-keys FILE|env:NAME" in shown
    assert "--single-use URL" in shown
    assert "redis://HOST:PORT/DB" in shown


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--state-keys", "/nonexistent/keys.json"], "cannot read it"),
        (["--state-keys", "env:MRTR_TEST_UNSET_KEYS"], "is not set"),
        (["--single-use", "redis://127.0.0.1:1/0"], "needs --state-keys"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = serve(["--http", "127.0.0.1:0", *argv], capsys)
    assert code == 2
    assert err.startswith("mrtr serve: error: ") and message in err, err


def test_a_bad_keys_document_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "keys.json"
    bad.write_text('{"signing_key": "k9", "keys": {"k1": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}')
    code, err = serve(["--http", "127.0.0.1:0", "--state-keys", str(bad)], capsys)
    assert code == 2
    assert "'k9' is not one of" in err, err


def test_a_store_url_that_is_not_redis_exits_2(
    keys_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--http", "127.0.0.1:0", "--state-keys", str(keys_file)]
    code, err = serve([*argv, "--single-use", "http://127.0.0.1:6379/0"], capsys)
    assert code == 2
    assert "expected redis://HOST:PORT/DB" in err, err


def test_shared_state_is_for_http_only(keys_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = serve(["--stdio", "--state-keys", str(keys_file)], capsys)
    assert code == 2
    assert "only apply to --http" in err, err


def test_an_app_that_is_not_an_mcp_app_exits_2(
    keys_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--http", "127.0.0.1:0", "--state-keys", str(keys_file)]
    code, err = serve([*argv, "--app", "support.srv_apps:TestApp"], capsys)
    assert code == 2
    assert "is not an McpApp" in err, err


def start(*workers: Worker) -> None:
    for worker in workers:  # importing side by side
        worker.spawn()
    for worker in workers:
        worker.wait_ready()


def test_workers_with_the_same_keys_serve_each_others_legs(
    redis_server: RedisServer, tmp_path: Path, keys_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MRTR_TEST_STATE_KEYS", KEYS)
    from_file = Worker(tmp_path, keys_file, redis_server.url)
    from_env = Worker(tmp_path, Path("env:MRTR_TEST_STATE_KEYS"), redis_server.url)
    try:
        start(from_file, from_env)
        flow = Flow(from_file.port, "plan_trip", {"destination": "Rome"}, "pair")
        flow.leg()  # sealed by the worker that read the file
        flow.port = from_env.port  # opened by the one that read the environment
        flow.answer({"traveller": {"name": "Ada"}})
        flow.port = from_file.port
        assert text_of(flow.answer({"nights": {"nights": 2}})) == "Trip to Rome for Ada: 2 nights."
    finally:
        from_file.stop()
        from_env.stop()


def test_an_unreachable_store_warns_and_fails_redeemed_legs_closed(
    services: dict[str, str], tmp_path: Path, keys_file: Path
) -> None:
    worker = Worker(tmp_path, keys_file, f"redis://127.0.0.1:{free_port()}/0")
    try:
        start(worker)
        assert "warning: --single-use redis://127.0.0.1:" in worker.log.read_text()
        flow = Flow(worker.port, "deploy", {"env": "prod"}, "closed")
        assert flow.leg()["result"]["resultType"] == "input_required"  # a new call: no state
        flow.answer({"confirm": {"confirm": True}})  # redeems a state: it must be spent first
        code, _ = error_reason(flow.last)
        assert code == -32603
        assert "127.0.0.1" not in flow.last["error"]["message"]  # no infrastructure to the client
        assert worker.alive  # the worker itself carries on
    finally:
        worker.stop()


@pytest.mark.parametrize(
    ("sig", "code", "line"),
    [(signal.SIGTERM, 0, "terminated"), (signal.SIGINT, 130, "interrupted")],
)
def test_a_worker_with_a_store_stops_cleanly(
    redis_server: RedisServer, tmp_path: Path, keys_file: Path, sig: int, code: int, line: str
) -> None:
    # the store's connection pool is open while serving: a signal still ends the worker
    # the documented way, with no traceback
    worker = Worker(tmp_path, keys_file, redis_server.url)
    try:
        start(worker)
        assert worker.process is not None
        worker.process.send_signal(sig)
        assert worker.process.wait(timeout=30) == code
        log = worker.log.read_text()
        assert f"mrtr serve: {line}" in log
        assert "Traceback" not in log
    finally:
        worker.stop()
