"""failover-assignment on real Pulsar 4.0 brokers (and 4.2.4 ones, which the product models as
4.0's): the modulo skew of single-partition topics, and the PIP-392 alternative checked against
a broker that runs it.

Ten partitioned topics of one partition each, five consumers on one Failover subscription
across all of them (a multi-topic subscribe). With the default modulo rule every partition 0
goes to the first consumer by name: the analysis must report that skew and its alternative.
A second broker started with `activeConsumerFailoverConsistentHashing=true` runs the same set-up
(same topic names: the ring hashes them): its observed assignment must equal the alternative,
and the analysis of its snapshot must offer the first broker's assignment as its own
alternative. Closing the active consumer then shows as one change per partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pulsar
import pytest

from pulsar_lens.core.model import Snapshot
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.plugins.builtin.failover_assignment import FailoverAssignment
from tests.brokers import BrokerPool, lines_modelled_as
from tests.live.failover_clients import FailoverClient
from tests.live.lens_polls import (
    Recorder,
    admin,
    listed_consumers,
    pulsar_client,
    wait_for,
    wait_for_bulk,
)
from tests.plugins.failover_frames import assignment

SUB = "fo"
WORKERS = tuple(f"worker-{i}" for i in range(1, 6))
PLUGIN = FailoverAssignment()
CONSISTENT = {"activeConsumerFailoverConsistentHashing": "true"}


@pytest.fixture
def topics() -> list[str]:
    """Ten fresh topic names, the same on both brokers of a test."""
    base = f"persistent://public/default/fo10-{uuid.uuid4().hex[:8]}"
    return [f"{base}-{i}" for i in range(10)]


class Setup:
    """Partitioned topics on one broker (by default ten of one partition each) and five
    multi-topic Failover consumers."""

    def __init__(
        self, broker: LocalPulsar, topics: Sequence[str], root: Path, *, partitions: int = 1
    ) -> None:
        self.broker, self.topics, self.count = broker, list(topics), partitions
        for topic in topics:
            path = topic.replace("persistent://", "/admin/v2/persistent/")
            admin(broker, "PUT", f"{path}/partitions", json=partitions)
        self.client = pulsar_client(broker)
        self.consumers = {
            name: self.client.subscribe(
                self.topics,
                SUB,
                consumer_type=pulsar.ConsumerType.Failover,
                consumer_name=name,
            )
            for name in WORKERS
        }
        self.recorder = Recorder(broker, root)

    def partitions(self) -> list[str]:
        return [f"{t}-partition-{i}" for t in self.topics for i in range(self.count)]

    def poll_settled(self, names: Sequence[str]) -> Snapshot:
        """Store a poll once the bulk stats list exactly `names` on every partition and two
        polls agree on every partition's consumers and active consumer."""
        wanted = sorted(names)
        for partition in self.partitions():
            wait_for_bulk(
                self.broker,
                partition,
                lambda s: listed_consumers(s, SUB) == wanted,
                what=f"the consumers {wanted}",
            )
        previous: dict[str, Any] = {}

        def settled(snapshot: Snapshot) -> bool:
            state = self._state(snapshot)
            complete = len(state) == len(self.partitions()) and all(
                active is not None and consumers == tuple(wanted)
                for active, consumers in state.values()
            )
            stable = complete and state == previous.get("state")
            previous["state"] = state
            return stable

        return self.recorder.poll_until(
            settled, what=f"a settled poll of {names}", show=self._state
        )

    def _state(self, snapshot: Snapshot) -> dict[str, tuple[str | None, tuple[str, ...]]]:
        wanted = set(self.partitions())
        consumers: dict[str, list[str]] = {}
        for c in snapshot.consumers:
            if c.topic in wanted and c.subscription == SUB:
                consumers.setdefault(c.topic, []).append(c.consumer_name)
        return {
            s.topic: (s.active_consumer_name, tuple(sorted(consumers.get(s.topic, []))))
            for s in snapshot.subscriptions
            if s.topic in wanted and s.subscription == SUB
        }

    def label(self) -> str:
        if len(self.topics) == 1:
            return f"{SUB} @ {self.topics[0]}"
        return f"{SUB} @ {len(self.topics)} topics ({sorted(self.topics)[0]}, ...)"

    def close(self) -> None:
        self.client.close()
        self.recorder.close()


@pytest.fixture
def modulo_setup(
    broker_pool: BrokerPool, topics: list[str], tmp_path: Path, line: str
) -> Iterator[Setup]:
    setup = Setup(broker_pool.get(version=line), topics, tmp_path / "modulo")
    yield setup
    setup.close()


@pytest.fixture
def line() -> str:
    """The broker line of the set-ups below; a test parametrised by `line` runs on others."""
    return "4.0"


@pytest.fixture
def consistent_setup(
    broker_pool: BrokerPool, topics: list[str], tmp_path: Path, line: str
) -> Iterator[Setup]:
    broker = broker_pool.get(CONSISTENT, version=line)
    setup = Setup(broker, topics, tmp_path / "consistent")
    yield setup
    setup.close()


@pytest.mark.parametrize("line", lines_modelled_as("4.0"))
def test_failover_assignment_live_skew_and_the_pip392_alternative(
    modulo_setup: Setup, consistent_setup: Setup
) -> None:
    modulo_setup.poll_settled(WORKERS)
    first = modulo_setup.recorder.run(PLUGIN, subscription=modulo_setup.label())
    group = first.result.frames["groups"].set_index("label").loc[modulo_setup.label()]
    observed = assignment(first.result, "observed")
    alternative = assignment(first.result, "alternative")
    assert set(observed.values()) == {"worker-1"}  # partition 0 % 5 -> first by name
    assert (group["mode"], group["unexplained"], group["partitions"]) == ("modulo", 0, 10)
    assert group["imbalance"] == 5.0
    assert group["partitions_moving"] == sum(name != "worker-1" for name in alternative.values())
    assert group["imbalance_alternative"] < 5.0

    consistent_setup.poll_settled(WORKERS)
    second = consistent_setup.recorder.run(PLUGIN, subscription=consistent_setup.label())
    assert assignment(second.result, "observed") == alternative  # the broker running PIP-392
    assert second.result.summary["selection"]["mode"] == "consistent"
    assert assignment(second.result, "alternative") == observed


def test_failover_assignment_live_on_3_0_is_modulo_without_a_pip392_what_if(
    broker_pool: BrokerPool, tmp_path: Path
) -> None:
    """A Pulsar 3.0.7 broker: five consumers on one topic of 12 partitions; partition i's
    active consumer is the i % 5-th by name, as the model says, and the page offers no PIP-392
    alternative, since 3.0 has no such setting."""
    topic = f"persistent://public/default/fo30-{uuid.uuid4().hex[:8]}"
    setup = Setup(broker_pool.get(None, version="3.0"), [topic], tmp_path / "3.0", partitions=12)
    try:
        setup.poll_settled(WORKERS)
        output = setup.recorder.run(PLUGIN, subscription=setup.label())
    finally:
        setup.close()
    summary = output.result.summary
    assert (summary["pulsar"], summary["pip_392"]) == ("3.0", False)
    observed = assignment(output.result, "observed")
    expected = {f"{topic}-partition-{i}": WORKERS[i % len(WORKERS)] for i in range(12)}
    assert observed == expected  # what the 3.0.7 broker chose, as listed by its stats
    group = output.result.frames["groups"].set_index("label").loc[setup.label()]
    assert (group["mode"], group["unexplained"], group["partitions"]) == ("modulo", 0, 12)
    partitions = output.result.frames["partitions"]
    assert partitions["alternative"].isna().all()  # no PIP-392 alternative on 3.0


def test_failover_assignment_live_active_consumer_change_counts_as_a_flap(
    modulo_setup: Setup,
) -> None:
    modulo_setup.poll_settled(WORKERS)
    modulo_setup.consumers.pop("worker-1").close()
    modulo_setup.poll_settled(WORKERS[1:])
    output = modulo_setup.recorder.run(PLUGIN, subscription=modulo_setup.label(), flap_changes=1)
    parts = output.result.frames["partitions"]
    mine = parts[parts["label"] == modulo_setup.label()]
    assert set(mine["observed"]) == {"worker-2"}
    assert set(mine["changes"]) == {1} and mine["flapping"].all()
    assert set(mine["seen"]) == {"worker-1, worker-2"}
    assert output.result.summary["selection"]["mode"] == "modulo"


def test_failover_assignment_live_stats_carry_no_priority_level(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    topic = f"persistent://public/default/fo-prio-{uuid.uuid4().hex[:8]}"
    with FailoverClient(pulsar.service_url) as client:
        client.subscribe(topic, SUB, name="primary", priority_level=0)
        client.subscribe(topic, SUB, name="backup", priority_level=1)
        path = topic.replace("persistent://", "/admin/v2/persistent/")

        def both() -> list[dict[str, Any]] | None:
            stats = admin(pulsar, "GET", f"{path}/stats").json()
            consumers = stats["subscriptions"][SUB]["consumers"]
            return consumers if len(consumers) == 2 else None

        consumers = wait_for(both, what="both consumers listed")
        assert all("priorityLevel" not in c for c in consumers)
        assert all(c["metadata"] == {} for c in consumers)
