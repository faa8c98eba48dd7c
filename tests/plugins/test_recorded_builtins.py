"""The built-ins on snapshots polled from recorded Pulsar 4.0.7 answers (tests/data/admin_api)."""

from __future__ import annotations

import responses

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.model import Snapshot
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from pulsar_lens.plugins.builtin.stuck_hashes import StuckHashes
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.runner import run_on_inputs
from pulsar_lens.plugins.testing import make_inputs, read_by
from tests.collectors import recorded

ORDERS = "persistent://public/default/orders"


def replay(scenario: str) -> Snapshot:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        recorded.register(mock, scenario)
        return poll(AdminClient(recorded.BASE, retries=0))


def test_recorded_stuck_hashes_names_holder_and_new_owner() -> None:
    snapshot = replay("default")
    plugin = StuckHashes()
    hashes = run_on_inputs(plugin, make_inputs([snapshot], read_by(plugin))).result.frames["hashes"]
    recorded_hashes = sorted(d.hash for d in snapshot.draining_hashes)
    assert sorted(hashes["hash"]) == recorded_hashes and len(recorded_hashes) > 0
    assert set(hashes["consumer_name"]) == {"ks-1"}
    # every hash the broker drains for ks-1 lies in the ranges it now gives ks-2
    assert set(hashes["waiting_consumer"]) == {"ks-2"}
    assert set(hashes["state"]) == {"draining"}  # one poll: no streak yet
    ks1 = next(c for c in snapshot.consumers if c.consumer_name == "ks-1")
    assert set(hashes["holder_unacked_messages"]) == {ks1.unacked_messages}


def test_recorded_stuck_hashes_stuck_when_polls_repeat_while_messages_wait() -> None:
    first, second = replay("default"), replay("default")
    assert all(d.blocked_attempts > 0 for d in second.draining_hashes)
    plugin = StuckHashes()
    output = run_on_inputs(plugin, make_inputs([first, second], plugin.inputs), {"polls": 2})
    assert set(output.result.frames["hashes"]["state"]) == {"stuck"}
    assert output.result.summary["stuck"] == len(second.draining_hashes)
    assert output.result.frames["violations"].empty


def test_recorded_stuck_hashes_held_back_by_the_classic_dispatcher() -> None:
    snapshot = replay("classic-modular")
    plugin = StuckHashes()
    output = run_on_inputs(plugin, make_inputs([snapshot], read_by(plugin)))
    held = output.result.frames["held_back"]
    assert held[["topic", "subscription", "consumer_name"]].values.tolist() == [
        [ORDERS, "ks", "ks-2"]
    ]
    ks2 = next(c for c in snapshot.consumers if c.consumer_name == "ks-2")
    assert held["read_position_when_joining"].iloc[0] == ks2.read_position_when_joining
    assert output.result.frames["hashes"].empty


def test_recorded_subscription_status_stop_for_the_idle_subscription() -> None:
    plugin = SubscriptionStatus()
    snapshot = replay("default")
    status = run_on_inputs(plugin, make_inputs([snapshot], read_by(plugin))).result.frames["status"]
    idle = status[(status["topic"] == ORDERS) & (status["subscription"] == "idle")].iloc[0]
    assert (idle["status"], idle["consumer_count"]) == ("STOP", 0)
    assert not status["topic"].str.contains("__change_events").any()


def test_recorded_bundle_ownership_map() -> None:
    plugin = BundleOwnership()
    snapshot = replay("default")
    output = run_on_inputs(plugin, make_inputs([snapshot], read_by(plugin)))
    bundles = output.result.frames["bundles"]
    assert len(bundles) == len(snapshot.bundles)
    assert set(bundles["owner_broker"].dropna()) == {recorded.BROKER}
    topics = output.result.frames["topics"]
    orders = topics[topics["topic"] == ORDERS].iloc[0]
    owned = bundles[(bundles["namespace"] == "public/default")].set_index("bundle")
    assert owned.loc[orders["bundle"], "owner_broker"] == recorded.BROKER
    assert output.result.summary["unowned"] == sum(b.owner_broker is None for b in snapshot.bundles)
