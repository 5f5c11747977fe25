"""Scale-out on real parts: three ``mrtr serve --http`` workers, one Redis, nginx in front.

The workers share sealing keys (``--state-keys``) and a single-use store
(``--single-use redis://...``); nginx balances round-robin, so consecutive legs
of one flow land on different workers.  The evidence of which worker served a
leg is nginx's own: ``$upstream_addr`` in its access log, next to the ``X-Leg``
header the test sends (no worker code reports it).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import time
from collections.abc import Iterator

import pytest
from scale_cluster import Cluster, Flow, accept, error_reason, post, text_of, tool_leg

TRAVELLER = {"traveller": {"name": "Ada"}, "nights": {"nights": 3}}
CONFIRM = {"confirm": {"confirm": True}}
BOOKING = {"guests": {"guests": 2}, "nights": {"nights": 4}}
INTERVIEW = {"name": {"name": "Ada"}, "role": {"role": "engineer"}}


@pytest.fixture(scope="module")
def cluster(
    services: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    running = Cluster.start(services, tmp_path_factory.mktemp("scale"))
    try:
        yield running
    finally:
        running.stop()


def served_by(cluster: Cluster, flow: Flow) -> list[str]:
    """The worker that answered each leg of ``flow`` (the last upstream nginx tried)."""
    logged = cluster.nginx.legs(flow.legs)
    return [logged[leg][-1] for leg in flow.legs]


def assert_spread(cluster: Cluster, flow: Flow) -> list[str]:
    workers = served_by(cluster, flow)
    known = {w.address for w in cluster.workers}
    assert set(workers) <= known, workers
    for before, after in itertools.pairwise(workers):
        assert before != after, f"two legs in a row on {before}: {workers}"
    return workers


def test_a_stateless_flow_completes_across_workers(cluster: Cluster) -> None:
    flow = Flow(cluster.nginx.port, "plan_trip", {"destination": "Lisbon"}, "trip")
    assert text_of(flow.run(TRAVELLER)) == "Trip to Lisbon for Ada: 3 nights."
    assert len(flow.legs) == 3
    assert len(set(assert_spread(cluster, flow))) == 3  # every worker served one leg


def test_a_once_flow_completes_across_workers_and_a_replay_elsewhere_is_refused(
    cluster: Cluster,
) -> None:
    flow = Flow(cluster.nginx.port, "deploy", {"env": "prod"}, "deploy")
    assert text_of(flow.run(CONFIRM)) == "Deployed to prod."
    first = assert_spread(cluster, flow)
    flow.send(flow.sent)  # the same last leg again, byte for byte: a replay
    assert error_reason(flow.last) == (-32602, "replayed")
    replayed_on = served_by(cluster, flow)[-1]
    assert replayed_on != first[-1]  # another worker: it learnt of the spend through Redis


def test_concurrent_replays_across_workers_deploy_once(cluster: Cluster) -> None:
    flow = Flow(cluster.nginx.port, "deploy", {"env": "prod"}, "storm")
    flow.leg()
    state = flow.last["result"]["requestState"]
    final = tool_leg(
        "deploy", {"env": "prod"}, responses={"confirm": accept({"confirm": True})}, state=state
    )
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(
            pool.map(lambda i: post(cluster.nginx.port, final, f"storm.final{i}"), range(12))
        )
    deployed = [a for a in answers if "result" in a]
    refused = [a for a in answers if "error" in a]
    assert [text_of(a) for a in deployed] == ["Deployed to prod."]
    assert {error_reason(a) for a in refused} == {(-32602, "replayed")}
    finals = [f"storm.final{i}" for i in range(12)]
    logged = cluster.nginx.legs(finals)
    workers = {logged[leg][-1] for leg in finals}
    assert workers == {w.address for w in cluster.workers}  # every worker took part


def test_a_steps_flow_completes_across_workers_and_its_last_step_runs_once(
    cluster: Cluster,
) -> None:
    flow = Flow(cluster.nginx.port, "book_room", {}, "steps")
    assert text_of(flow.run(BOOKING)) == "Booked a room for 2 guests, 4 nights."
    assert len(flow.legs) == 3
    assert_spread(cluster, flow)
    flow.send(flow.sent)
    assert error_reason(flow.last) == (-32602, "replayed")


def test_a_continuation_completes_behind_sticky_routing(cluster: Cluster) -> None:
    flow = Flow(cluster.nginx.sticky_port, "interview", {}, "sticky")
    assert text_of(flow.run(INTERVIEW)) == "Ada joins as engineer."
    assert len(flow.legs) == 3
    assert len(set(served_by(cluster, flow))) == 1  # every leg on the worker that parked it


def test_a_continuation_without_sticky_routing_is_an_unknown_continuation(
    cluster: Cluster,
) -> None:
    flow = Flow(cluster.nginx.port, "interview", {}, "roaming")
    flow.leg()
    flow.answer(INTERVIEW)  # lands on another worker, which never parked this flow
    assert_spread(cluster, flow)
    assert error_reason(flow.last) == (-32602, "unknown_continuation")


def test_workers_killed_between_rounds_and_the_flow_completes_on_another(
    cluster: Cluster,
) -> None:
    flow = Flow(cluster.nginx.port, "plan_trip", {"destination": "Oslo"}, "killed")
    flow.leg()
    first = served_by(cluster, flow)[0]
    # SIGKILL the worker that sealed the state, and one more: one survivor is left, so the
    # round robin must pick a dead worker for one of the next legs and nginx fails it over
    victims = [cluster.worker_at(first), *(w for w in cluster.workers if w.address != first)][:2]
    survivor = next(w for w in cluster.workers if w not in victims)
    for victim in victims:
        victim.kill()
    try:
        assert not any(victim.alive for victim in victims)
        assert text_of(flow.run(TRAVELLER)) == "Trip to Oslo for Ada: 3 nights."
        assert served_by(cluster, flow)[1:] == [survivor.address] * 2
        tried = [cluster.nginx.legs()[leg] for leg in flow.legs[1:]]
        dead = {victim.address for victim in victims}
        assert any(dead & set(attempts[:-1]) for attempts in tried), tried  # nginx failed over
    finally:
        for victim in victims:
            victim.spawn()
        for victim in victims:
            victim.wait_ready()
        time.sleep(1.2)  # past fail_timeout: nginx sends to them again
