"""The broker pool hands out a shared cluster only once it is whole, whatever a test before did
to it: two loopback fakes stand for the brokers, each answering the three calls of the proof."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pulsar_lens.lab.cluster import CLUSTER_NAME, ClusterProcess, LocalPulsarCluster
from tests.brokers import CLUSTER_SETTINGS, BrokerPool, _key, missing_parts
from tests.fake_admin import Answer, FakeAdmin, Seen

HEALTH = "/admin/v2/brokers/health"
LISTED = f"/admin/v2/brokers/{CLUSTER_NAME}"
LEADER = "/admin/v2/brokers/leaderBroker"
SLEEP = "import time; time.sleep(600)"  # a broker process that keeps running


@dataclass
class Broker:
    """What one fake broker answers; a test changes it while the pool waits."""

    fake: FakeAdmin
    healthy: bool = True
    listed: list[str] = field(default_factory=list)
    leader: str | None = None

    def serve(self) -> None:
        self.fake.rule(HEALTH, lambda _: (200, {}, b"ok") if self.healthy else (503, {}, b""))
        self.fake.rule(LISTED, lambda _: as_json(self.listed))
        self.fake.rule(LEADER, self._leader)

    def _leader(self, _: Seen) -> Answer:
        if self.leader is None:  # a broker that knows no leader answers 404
            return 404, {}, b'{"reason": "no leader"}'
        return as_json({"serviceUrl": f"http://{self.leader}", "brokerId": self.leader})


def as_json(payload: object) -> Answer:
    return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode()


@dataclass
class Fakes:
    cluster: LocalPulsarCluster
    brokers: list[Broker]

    @property
    def ids(self) -> list[str]:
        return self.cluster.broker_ids


@pytest.fixture
def fakes(tmp_path: Path) -> Iterator[Fakes]:
    """A whole two-broker cluster of fakes, each broker "running" as a sleeping process."""
    with ExitStack() as stack:
        brokers = [Broker(stack.enter_context(FakeAdmin())) for _ in range(2)]
        cluster = LocalPulsarCluster(brokers=2)
        for i, broker in enumerate(brokers):
            member = ClusterProcess(f"broker-{i}", tmp_path / f"broker-{i}.log")
            member.web_port = broker.fake.server.server_address[1]
            member.process = subprocess.Popen([sys.executable, "-c", SLEEP])
            stack.callback(member.process.wait, 30)
            stack.callback(member.process.kill)
            cluster.members.append(member)
        for broker in brokers:
            broker.listed, broker.leader = list(cluster.broker_ids), cluster.broker_ids[0]
            broker.serve()
        yield Fakes(cluster, brokers)


def pool_of(fakes: Fakes, *, whole_timeout: float) -> BrokerPool:
    pool = BrokerPool(whole_timeout=whole_timeout)
    pool._clusters[_key("modular", CLUSTER_SETTINGS)] = fakes.cluster  # as if started
    return pool


BREAKS: dict[str, tuple[Callable[[Fakes], object], Callable[[Fakes], str]]] = {
    "a failing health check": (
        lambda f: setattr(f.brokers[1], "healthy", False),
        lambda f: f"{f.ids[1]}: its health check did not answer ok",
    ),
    "a broker not listed yet": (
        lambda f: setattr(f.brokers[0], "listed", [f.ids[0]]),
        lambda f: f"{f.ids[0]} lists the brokers {[f.ids[0]]!r}",
    ),
    "no leader known": (
        lambda f: setattr(f.brokers[1], "leader", None),
        lambda f: f"{f.ids[1]}: HTTP Error 404",
    ),
    "two leaders named": (
        lambda f: setattr(f.brokers[1], "leader", f.ids[1]),
        lambda f: f"the brokers name the leaders {sorted(f.ids)!r}",
    ),
    "a leader outside the cluster": (
        lambda f: [setattr(b, "leader", "127.0.0.1:1") for b in f.brokers],
        lambda _: "the brokers name the leaders ['127.0.0.1:1']",
    ),
}


def test_a_whole_cluster_misses_nothing(fakes: Fakes) -> None:
    assert missing_parts(fakes.cluster) == []


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_part_missing_is_named(fakes: Fakes, name: str) -> None:
    breaks, said = BREAKS[name]
    breaks(fakes)
    missing = "; ".join(missing_parts(fakes.cluster))
    assert said(fakes) in missing


def test_a_broker_that_is_not_running_is_named(fakes: Fakes) -> None:
    process = fakes.cluster.broker_processes[1].process
    assert process is not None
    process.kill()
    process.wait(30)
    assert f"{fakes.ids[1]}: its process is not running" in missing_parts(fakes.cluster)


def test_the_pool_hands_out_the_cluster_only_once_it_is_whole_again(fakes: Fakes) -> None:
    """A revived broker is listed by the other one only some calls later: the pool waits."""
    behind = fakes.brokers[0]
    behind.listed = [fakes.ids[0]]
    asked: list[Seen] = []

    def listed_late(seen: Seen) -> Answer:
        asked.append(seen)
        return as_json(fakes.ids if len(asked) >= 3 else behind.listed)

    behind.fake.rule(LISTED, listed_late)
    assert pool_of(fakes, whole_timeout=120).cluster() is fakes.cluster
    assert len(asked) >= 3  # it asked again until the broker was listed
    assert missing_parts(fakes.cluster) == []


def test_the_pool_fails_saying_what_was_missing_when_the_cluster_stays_broken(
    fakes: Fakes,
) -> None:
    fakes.brokers[1].healthy = False
    with pytest.raises(AssertionError) as failed:
        pool_of(fakes, whole_timeout=1.0).cluster()
    message = str(failed.value)
    assert f"waiting for the cluster of {', '.join(fakes.ids)} to be whole again" in message
    assert f"{fakes.ids[1]}: its health check did not answer ok" in message
