"""Tasks (SEP-2663) at scale, on real parts: ``mrtr serve --http`` workers, Redis, nginx.

Two deployments, the two ways ``docs/deploying.md`` describes:

* **a shared store**: three workers with ``--task-store redis://...`` (a short
  ``--task-lease``) behind nginx round-robin: a task created on one worker is
  polled, answered and cancelled through the others; concurrent settles agree; a
  worker killed mid-task leaves its task ``failed`` once its lease lapses; another
  principal's id is unknown on every worker; the per-client share holds across
  workers; a Redis that does not answer fails task requests closed;
* **routing on ``Mcp-Name``**: three workers with their own memory stores and
  ``--task-id-prefix wN``, nginx sending ``tasks/*`` to the worker their task id
  names: every leg of a task reaches the worker that holds it; a killed worker's
  task is a 502 while it is down and unknown after it restarts.

Which worker served each leg is nginx's own evidence: ``$upstream_addr`` in its
access log next to the ``X-Leg`` header each request carries.  Every request
sends ``X-Forwarded-For`` with its test's own client address (the workers trust
nginx), so each test fills its own share of tasks.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import itertools
import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from mrtr_transports.stores.redis_tasks import WORKER_STOPPED
from scale_cluster import (
    LEG_TIMEOUT,
    TASKS_META,
    Cluster,
    Worker,
    accept,
    error_reason,
    exchange,
    post,
    task_call,
    task_method,
)

#: Seconds a worker's lease on a task it runs lasts (``--task-lease``): short, for the kill.
LEASE = 5.0
TRUST_NGINX = ["--trusted-proxy", "127.0.0.1/32"]
TERMINAL = {"completed", "failed", "cancelled"}


@pytest.fixture(scope="module")
def shared(services: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three workers sharing one Redis task store, principal "ada"."""

    def options(i: int, redis_url: str) -> list[str]:
        return ["--task-store", redis_url, "--task-lease", str(LEASE), *TRUST_NGINX]

    running = Cluster.start(
        services,
        tmp_path_factory.mktemp("tasks-shared"),
        worker_args=options,
        env={"MRTR_SCALE_PRINCIPAL": "ada"},
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def routed(services: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three workers, each with its own memory store and task ids ``wN.…``; nginx's
    ``route_port`` sends the task methods to the worker the id names."""
    running = Cluster.start(
        services,
        tmp_path_factory.mktemp("tasks-routed"),
        worker_args=lambda i, _: ["--task-id-prefix", f"w{i}", *TRUST_NGINX],
        routes=lambda i: f"w{i}.",
    )
    try:
        yield running
    finally:
        running.stop()


@attrs.define
class Tasks:
    """One client's task requests through one nginx port, each leg labelled for the log."""

    port: int
    label: str
    client: str
    legs: list[str] = attrs.Factory(list)

    def send(self, message: Mapping[str, Any]) -> dict[str, Any]:
        return post(self.port, message, self.next_leg(), self.client)

    def next_leg(self) -> str:
        leg = f"{self.label}.{len(self.legs) + 1}"
        self.legs.append(leg)
        return leg

    def create(self, arguments: Mapping[str, Any]) -> str:
        created = self.send(task_call("chore", arguments))
        assert "result" in created, created
        assert created["result"]["resultType"] == "task", created
        assert created["result"]["status"] == "working"
        return str(created["result"]["taskId"])

    def get(self, task_id: str) -> dict[str, Any]:
        answer = self.send(task_method("tasks/get", task_id))
        assert "result" in answer, answer
        return dict(answer["result"])

    def poll(self, task_id: str, until: set[str], timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task = self.get(task_id)
            if task["status"] in until:
                return task
            assert time.monotonic() < deadline, f"still {task['status']}: {task}"
            time.sleep(0.1)


def served_by(cluster: Cluster, legs: list[str]) -> list[str]:
    """The worker that answered each leg (the last upstream nginx tried)."""
    logged = cluster.nginx.legs(legs)
    return [logged[leg][-1] for leg in legs]


def steer_away(cluster: Cluster, tasks: Tasks, task_id: str, address: str) -> None:
    """A ``tasks/get`` more when the round robin's next leg would land on ``address``
    (nginx takes its workers in turn, in the configured order)."""
    order = [w.address for w in cluster.workers]
    last = served_by(cluster, tasks.legs)[-1]
    if order[(order.index(last) + 1) % len(order)] == address:
        tasks.get(task_id)


def restart(cluster: Cluster, worker: Worker) -> None:
    worker.spawn()
    worker.wait_ready()
    time.sleep(1.2)  # past fail_timeout: nginx sends to it again


# --- a shared store (Redis) -----------------------------------------------------------------


def test_a_task_is_polled_and_answered_through_other_workers(shared: Cluster) -> None:
    tasks = Tasks(shared.nginx.port, "answered", "10.0.1.1")
    task_id = tasks.create({"ask": True})
    asked = tasks.poll(task_id, {"input_required"})
    assert set(asked["inputRequests"]) == {"name"}
    creator = served_by(shared, tasks.legs)[0]
    steer_away(shared, tasks, task_id, creator)
    update = task_method("tasks/update", task_id, inputResponses={"name": accept({"name": "Ada"})})
    assert "result" in tasks.send(update)
    answering_leg = tasks.legs[-1]
    done = tasks.poll(task_id, {"completed"})
    assert done["result"]["content"] == [{"type": "text", "text": "chore done for Ada"}]
    workers = served_by(shared, tasks.legs)
    assert set(workers) == {w.address for w in shared.workers}  # every worker took part
    assert workers[tasks.legs.index(answering_leg)] != creator  # answered elsewhere
    for before, after in itertools.pairwise(workers):
        assert before != after, workers  # round robin: no two legs in a row on one worker


def test_a_task_is_cancelled_through_another_worker(shared: Cluster) -> None:
    tasks = Tasks(shared.nginx.port, "cancelled", "10.0.2.2")
    task_id = tasks.create({"seconds": 120})
    assert tasks.get(task_id)["status"] == "working"
    assert tasks.send(task_method("tasks/cancel", task_id))["result"] is not None
    cancelled = tasks.get(task_id)
    assert cancelled["status"] == "cancelled"
    again = tasks.get(task_id)  # the same on the next worker
    assert (again["status"], again["lastUpdatedAt"]) == ("cancelled", cancelled["lastUpdatedAt"])
    workers = served_by(shared, tasks.legs)
    creator, _, canceller, *readers = workers
    assert canceller != creator and len(set(readers)) == 2


def test_workers_racing_to_settle_one_task_agree(shared: Cluster) -> None:
    tasks = Tasks(shared.nginx.port, "race", "10.0.3.3")
    task_id = tasks.create({"seconds": 0.3})  # it completes while the cancels arrive
    time.sleep(0.2)
    cancel = task_method("tasks/cancel", task_id)
    legs = [tasks.next_leg() for _ in range(12)]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        acks = list(pool.map(lambda leg: post(tasks.port, cancel, leg, tasks.client), legs))
    assert all("result" in ack for ack in acks), acks
    assert {w for w in served_by(shared, legs)} == {w.address for w in shared.workers}
    seen = [tasks.get(task_id) for _ in range(3)]  # one read on each worker
    assert seen[0]["status"] in ("completed", "cancelled")
    assert all(json.dumps(s, sort_keys=True) == json.dumps(seen[0], sort_keys=True) for s in seen)
    assert len(set(served_by(shared, tasks.legs[-3:]))) == 3


def test_a_worker_killed_mid_task_leaves_it_failed_once_its_lease_lapses(
    shared: Cluster,
) -> None:
    tasks = Tasks(shared.nginx.port, "killed", "10.0.4.4")
    task_id = tasks.create({"seconds": 120})
    creator = shared.worker_at(served_by(shared, tasks.legs)[0])
    creator.kill()
    killed_at = time.monotonic()
    try:
        failed = tasks.poll(task_id, TERMINAL, timeout=LEASE + 30)
        assert time.monotonic() - killed_at > LEASE - 1  # not before its lease lapsed
        assert failed["status"] == "failed"
        assert failed["error"] == {"code": -32603, "message": WORKER_STOPPED}
        assert creator.address not in served_by(shared, tasks.legs[1:])
        assert tasks.get(task_id)["error"]["message"] == WORKER_STOPPED  # and it stays so
    finally:
        restart(shared, creator)


def test_another_principals_task_is_unknown_on_every_worker(
    shared: Cluster, tmp_path: Path
) -> None:
    ada = Tasks(shared.nginx.port, "principal", "10.0.5.5")
    adas = ada.create({"seconds": 120})
    # a worker of principal "eve" on the same Redis, its own keys, not behind nginx
    keys = tmp_path / "eve-keys.json"
    keys.write_text(shared.workers[0].keys.read_text())
    options = ["--task-store", shared.redis.url, *TRUST_NGINX]
    eve = Worker(tmp_path, keys, shared.redis.url, options, {"MRTR_SCALE_PRINCIPAL": "eve"})
    eve.spawn()
    try:
        eve.wait_ready()
        eves = Tasks(eve.port, "eve", "10.0.5.6").create({"seconds": 120})
        never = "x" * len(eves)
        for worker in shared.workers:
            for method in ("tasks/get", "tasks/cancel"):
                refused = post(worker.port, task_method(method, eves), "direct", "10.0.5.5")
                unknown = post(worker.port, task_method(method, never), "direct", "10.0.5.5")
                assert error_reason(refused) == error_reason(unknown) == (-32602, None)
                assert refused["error"]["message"] == unknown["error"]["message"].replace(
                    never, eves
                )
        for method in ("tasks/get", "tasks/cancel"):
            refused = post(eve.port, task_method(method, adas), "direct", "10.0.5.6")
            assert error_reason(refused) == (-32602, None)
        assert ada.get(adas)["status"] == "working"  # eve's cancel changed nothing
        assert ada.send(task_method("tasks/cancel", adas))["result"] is not None
    finally:
        eve.stop()


def test_the_per_client_share_holds_across_workers(shared: Cluster) -> None:
    # Each leg straight to its own worker (round robin is not a promise under a loaded
    # nginx shared with other tests): two tasks held on two workers, refused on the third.
    first, second, third = (Tasks(w.port, "share", "10.0.6.6") for w in shared.workers)
    held = [first.create({"seconds": 120}), second.create({"seconds": 120})]
    refused = third.send(task_call("chore", {"seconds": 120}))
    assert error_reason(refused) == (-32000, "own_share")
    assert "max_tasks_per_client=2" in refused["error"]["message"]
    tasks = Tasks(shared.nginx.port, "share", "10.0.6.6")
    other = Tasks(shared.nginx.port, "share-other", "10.0.6.7")
    other.create({"seconds": 0})  # another client's share is its own
    for task_id in held:
        tasks.send(task_method("tasks/cancel", task_id))


def listen(port: int, task_id: str) -> tuple[http.client.HTTPConnection, Iterator[dict[str, Any]]]:
    """Open ``subscriptions/listen`` for ``task_id`` straight on one worker: the connection,
    and its SSE messages as they come."""
    message = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": [task_id]}, "_meta": TASKS_META},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen",
    }
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LEG_TIMEOUT)
    connection.request("POST", "/mcp", json.dumps(message), headers)
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("text/event-stream")

    def messages() -> Iterator[dict[str, Any]]:
        data: list[str] = []
        while line := response.readline().decode():
            if line.startswith("data:"):
                data.append(line[5:].strip())
            elif line in ("\n", "\r\n") and data:
                yield json.loads("\n".join(data))
                data = []

    return connection, messages()


def test_a_listen_stream_on_another_worker_hears_the_task(shared: Cluster) -> None:
    creator, listener, answerer = shared.workers
    task_id = Tasks(creator.port, "listened", "10.0.10.1").create({"seconds": 3, "ask": True})
    connection, messages = listen(listener.port, task_id)
    try:
        ack = next(messages)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        # the work, on the creator, asks (3 s in: after the stream is open): pushed by the listener
        asked = next(messages)
        assert asked["method"] == "notifications/tasks"
        assert asked["params"]["status"] == "input_required"
        assert list(asked["params"]["inputRequests"]) == ["name"]
        update = task_method(
            "tasks/update", task_id, inputResponses={"name": accept({"name": "Ada"})}
        )
        assert "result" in post(answerer.port, update, "listened.answer", "10.0.10.1")
        statuses = [next(messages)["params"] for _ in range(2)]
        assert [task["status"] for task in statuses] == ["working", "completed"]
        assert statuses[1]["result"]["content"] == [{"type": "text", "text": "chore done for Ada"}]
    finally:
        connection.close()


def test_a_redis_that_does_not_answer_fails_task_requests_closed(shared: Cluster) -> None:
    # (last in the module: the pause outlasts the leases of whatever still runs)
    tasks = Tasks(shared.nginx.port, "closed", "10.0.7.7")
    task_id = tasks.create({"seconds": 0})
    assert tasks.poll(task_id, TERMINAL)["status"] == "completed"
    shared.redis.pause()
    try:
        for message in (task_method("tasks/get", task_id), task_call("chore", {})):
            refused = tasks.send(message)
            assert refused["error"]["code"] == -32603, refused
            shown = json.dumps(refused)
            assert "fail closed" in shown
            assert "127.0.0.1" not in shown and str(shared.redis.port) not in shown
    finally:
        shared.redis.resume()
    assert tasks.get(task_id)["status"] == "completed"  # served again once Redis answers


# --- routing on Mcp-Name (memory stores) ---------------------------------------------------


def test_routing_sends_every_task_method_to_the_worker_holding_the_task(routed: Cluster) -> None:
    tasks = Tasks(routed.nginx.route_port, "routed", "10.0.8.8")
    task_id = tasks.create({"ask": True})
    number = int(task_id.split(".", 1)[0].removeprefix("w"))
    holder = routed.workers[number].address
    assert tasks.poll(task_id, {"input_required"})["inputRequests"]
    update = task_method("tasks/update", task_id, inputResponses={"name": accept({"name": "Ada"})})
    assert "result" in tasks.send(update)
    done = tasks.poll(task_id, {"completed"})
    assert done["result"]["content"] == [{"type": "text", "text": "chore done for Ada"}]
    split = len(tasks.legs)
    second = tasks.create({"seconds": 120})  # (a tools/call: round robin, any worker)
    second_holder = routed.workers[int(second.split(".", 1)[0][1:])].address
    tasks.send(task_method("tasks/cancel", second))
    assert tasks.get(second)["status"] == "cancelled"
    workers = served_by(routed, tasks.legs)
    assert workers[0] == holder  # the worker that created it named it
    assert workers[1:split] == [holder] * (split - 1)  # get, update, get...: all there
    assert workers[split] == second_holder
    assert workers[split + 1 :] == [second_holder] * 2  # cancel, get
    # without the routing (round robin), the other workers do not know it
    elsewhere = Tasks(routed.nginx.port, "unrouted", "10.0.8.8")
    answers = [elsewhere.send(task_method("tasks/get", task_id)) for _ in range(3)]
    unknown = [a for a in answers if "error" in a]
    assert len(unknown) == 2 and all(error_reason(a) == (-32602, None) for a in unknown)


def test_routing_a_killed_workers_task_is_502_then_unknown(routed: Cluster) -> None:
    tasks = Tasks(routed.nginx.route_port, "routed-killed", "10.0.9.9")
    task_id = tasks.create({"seconds": 120})
    holder = routed.workers[int(task_id.split(".", 1)[0][1:])]
    holder.kill()
    try:
        response, _ = exchange(
            tasks.port, task_method("tasks/get", task_id), tasks.next_leg(), tasks.client
        )
        assert response.status == 502  # nginx: the one worker that holds it is down
    finally:
        restart(routed, holder)
    gone = tasks.send(task_method("tasks/get", task_id))
    assert error_reason(gone) == (-32602, None)  # its memory went with it
    assert served_by(routed, tasks.legs)[-1] == holder.address
