"""``mrtr serve --task-store ... --task-lease ... --task-id-prefix ...``: the task options.

Usage errors exit 2 with a message that says what to fix (in-process: they stop
before anything is served).  Served: a worker whose task store cannot be reached
starts with a warning, and its task requests fail closed (-32603, no host named);
a worker with a store stops cleanly on a signal, its store's loop and subscription
ended with it; ``--task-id-prefix`` names the worker's task ids.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mrtr_transports.cli import serve as serve_command
from mrtr_transports.stores.keys import new_state_keys
from scale_cluster import Worker, post, task_call, task_method
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


def test_help_names_the_task_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        serve_command.main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    for option in ("--task-store URL", "--task-lease SEC", "--task-id-prefix NAME"):
        assert option in shown


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task-store", "redis://127.0.0.1:1/0"], "--task-store needs --state-keys"),
        (["--task-lease", "2"], "--task-lease only applies with --task-store"),
        (["--task-id-prefix", "w.1"], "--task-id-prefix 'w.1': 1 to 63 of"),
        (["--task-id-prefix", ""], "--task-id-prefix '': 1 to 63 of"),
        (["--task-id-prefix", "w1", "--app", "support.srv_apps:TestApp"], "not an McpApp"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = serve(["--http", "127.0.0.1:0", *argv], capsys)
    assert code == 2
    assert err.startswith("mrtr serve: error: ") and message in err, err


def test_lease_and_url_errors_exit_2(keys_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--http", "127.0.0.1:0", "--state-keys", str(keys_file)]
    code, err = serve([*argv, "--task-store", "http://127.0.0.1:6379/0"], capsys)
    assert (code, "--task-store 'http://127.0.0.1:6379/0': expected redis://" in err) == (2, True)
    store = ["--task-store", "redis://127.0.0.1:1/0"]
    for lease in ("0", "-1", "1.4", "inf", "nan"):
        code, err = serve([*argv, *store, "--task-lease", lease], capsys)
        assert (code, "--task-lease must be at least 1.5 seconds" in err) == (2, True), err


def test_task_options_are_for_http(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = serve(["--stdio", "--task-id-prefix", "w1"], capsys)
    assert code == 2
    assert "--task-id-prefix" in err and "only apply to --http" in err, err


def test_an_unreachable_task_store_warns_and_fails_task_requests_closed(
    services: dict[str, str], tmp_path: Path, keys_file: Path, redis_server: RedisServer
) -> None:
    gone = f"redis://127.0.0.1:{free_port()}/0"
    worker = Worker(tmp_path, keys_file, redis_server.url, ["--task-store", gone])
    try:
        worker.spawn()
        worker.wait_ready()
        assert "warning: --task-store redis://127.0.0.1:" in worker.log.read_text()
        for message in (task_call("chore", {}), task_method("tasks/get", "x" * 32)):
            refused = post(worker.port, message, "closed")
            assert refused["error"]["code"] == -32603, refused
            assert "fail closed" in refused["error"]["message"]
            assert "127.0.0.1" not in refused["error"]["message"]
        assert worker.alive
    finally:
        worker.stop()


def test_the_task_id_prefix_names_the_worker(
    services: dict[str, str], tmp_path: Path, keys_file: Path, redis_server: RedisServer
) -> None:
    for extra in (
        ["--task-id-prefix", "w7"],
        ["--task-id-prefix", "w7", "--task-store", redis_server.url],
    ):
        worker = Worker(tmp_path, keys_file, redis_server.url, extra)
        try:
            worker.spawn()
            worker.wait_ready()
            created = post(worker.port, task_call("chore", {}), "prefix")
            assert created["result"]["taskId"].startswith("w7."), created
        finally:
            worker.stop()


@pytest.mark.parametrize(
    ("sig", "code", "line"),
    [(signal.SIGTERM, 0, "terminated"), (signal.SIGINT, 130, "interrupted")],
)
def test_a_worker_with_a_task_store_stops_cleanly(
    redis_server: RedisServer, tmp_path: Path, keys_file: Path, sig: int, code: int, line: str
) -> None:
    options = ["--task-store", redis_server.url, "--task-lease", "2"]
    worker = Worker(tmp_path, keys_file, redis_server.url, options)
    try:
        worker.spawn()
        worker.wait_ready()
        created = post(worker.port, task_call("chore", {"seconds": 60}), "running")
        assert created["result"]["status"] == "working"  # a task runs when the signal comes
        assert worker.process is not None
        worker.process.send_signal(sig)
        exited = worker.process.wait(timeout=30)
        log = worker.log.read_text()
        assert exited == code, log
        assert f"mrtr serve: {line}" in log, log
        assert "Traceback" not in log, log
    finally:
        worker.stop()


def test_workers_on_both_loops_serve_one_task(
    redis_server: RedisServer, tmp_path: Path, keys_file: Path
) -> None:
    shared = ["--task-store", redis_server.url]
    on_asyncio = Worker(tmp_path, keys_file, redis_server.url, [*shared, "--loop", "asyncio"])
    on_trio = Worker(tmp_path, keys_file, redis_server.url, shared)
    try:
        for worker in (on_asyncio, on_trio):
            worker.spawn()
        for worker in (on_asyncio, on_trio):
            worker.wait_ready()
        created = post(on_asyncio.port, task_call("chore", {"ask": True}), "loops")
        task_id = created["result"]["taskId"]

        def poll(worker: Worker, status: str) -> dict[str, Any]:
            deadline = time.monotonic() + 30
            while True:
                task = post(worker.port, task_method("tasks/get", task_id), "loops")["result"]
                if task["status"] == status or time.monotonic() > deadline:
                    return dict(task)
                time.sleep(0.1)

        assert poll(on_trio, "input_required")["status"] == "input_required"
        answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
        update = task_method("tasks/update", task_id, inputResponses=answer)
        assert "result" in post(on_trio.port, update, "loops")
        done = poll(on_asyncio, "completed")
        assert done["result"]["content"] == [{"type": "text", "text": "chore done for Ada"}]
    finally:
        on_asyncio.stop()
        on_trio.stop()
