"""The demo workloads against a real broker fill every dashboard page with real data.

The same building blocks as `pulsar-lens demo`: DemoWorkloads, poll() in the polling loop,
the store, then the dashboard (AppTest) on what was collected. The workloads use their own
namespace, so their bundle unloads never touch other tests' topics.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.loop import PollLoop
from pulsar_lens.collectors.poll import diff, poll
from pulsar_lens.core.failover import partition_index
from pulsar_lens.core.store import Store
from pulsar_lens.dashboard.data import SNAPSHOT_KEY
from pulsar_lens.lab.demo import EVENTS, ORDERS, PAYMENTS, DemoSettings, DemoWorkloads
from pulsar_lens.lab.localpulsar import LocalPulsar
from tests.live.lens_polls import wait_for
from tests.pages import plugin_page

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
POLLS = 8


@dataclass(frozen=True)
class DemoRun:
    store: Path
    draining: int  # the broker's drainingHashesCount of payments-by-account after the polls


@pytest.fixture(scope="module")
def demo_run(pulsar: LocalPulsar, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRun]:
    namespace = f"public/lens-demo-{uuid.uuid4().hex[:6]}"
    settings = DemoSettings(
        namespace=namespace,
        stuck_after=4.0,
        churn_every=1000.0,
        unload_every=6.0,
        restuck_every=3.0,
    )
    root = tmp_path_factory.mktemp("demo") / "store"
    client = AdminClient(pulsar.admin_url)
    try:
        with DemoWorkloads(pulsar.service_url, pulsar.admin_url, settings=settings) as demo:
            loop = PollLoop(
                lambda: poll(client, namespaces=[namespace]),
                Store(root),
                interval=3.0,
                jitter=0.0,
                diff=diff,
                max_polls=POLLS,
            )
            loop.run()
            assert demo.unloads >= 1
            # the showcase holds (or comes back after a reconnection of the demo's client)
            topic = demo.topic(PAYMENTS)

            def draining() -> int | None:
                return demo.draining_hashes(topic, "payments-by-account") or None

            count = wait_for(
                draining,
                what="the broker to report draining hashes on payments-by-account",
                timeout=180.0,
                every=1.0,
            )
    finally:
        client.close()
    yield DemoRun(root, count)


@pytest.fixture(scope="module")
def demo_store(demo_run: DemoRun) -> Path:
    return demo_run.store


@pytest.fixture
def app(demo_store: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("PULSAR_LENS_STORE", str(demo_store))
    monkeypatch.setenv("PULSAR_LENS_POLL_INTERVAL", "1h")  # never stale during the test
    return AppTest.from_file(str(APP), default_timeout=60).run()


def _frame(at: AppTest, *columns: str) -> pd.DataFrame:
    for element in at.dataframe:
        if set(columns) <= set(element.value.columns):
            return element.value
    raise AssertionError(f"no dataframe with columns {columns}")


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_demo_overview_counts_the_demo_topics(demo_store: Path, app: AppTest) -> None:
    assert not app.exception
    metrics = _metrics(app)
    topics = set(Store(demo_store).read_latest("topics").to_pandas()["topic"])
    names = {t.rsplit("/", 1)[1] for t in topics}
    # orders, payments, audit, six partitions of events (and the namespace's system topic)
    assert {ORDERS, PAYMENTS, "demo-audit"} | {f"{EVENTS}-partition-{i}" for i in range(6)} <= names
    assert int(metrics["Topics"]) == len(topics)
    assert int(metrics["Subscriptions"]) >= 4 + 5
    assert int(metrics["Consumers"]) >= 3 + 2 + 6 * 3
    assert Store(demo_store).snapshots()["snapshot_id"].nunique() == POLLS


KS = "analysis_key-shared-map"


def stuck_poll(store: Path) -> dict[str, object]:
    """The sidebar's choice of the newest poll in which payments-stuck held draining hashes.
    The demo makes them (payments-ok joins while payments-stuck holds a message of every
    account), but a reconnection of the demo's client ends them: the loaded machine once saw
    the client's connection close during an unload of another bundle (which side closed it,
    the broker's log does not say), and both payments consumers subscribed again, so the
    polls after had none until the demo saw that and made them again (`restuck_every`)."""
    consumers = Store(store).read("consumers").to_pandas()
    held = consumers[
        (consumers["consumer_name"] == "payments-stuck")
        & (consumers["draining_hashes_count"].fillna(0) > 0)
    ]
    assert not held.empty, "no poll saw payments-stuck holding draining hashes"
    return {SNAPSHOT_KEY: str(held.sort_values("collected_at")["snapshot_id"].iloc[-1])}


def test_demo_key_shared_page_shows_stuck_payments_hashes(demo_store: Path, app: AppTest) -> None:
    page = plugin_page("key-shared-map", timeout=60, state=stuck_poll(demo_store))
    assert not page.exception
    labels = page.selectbox(key=f"{KS}_subscription").options
    payments = next(label for label in labels if f"/{PAYMENTS} |" in label)
    assert any(f"/{ORDERS} |" in label for label in labels)
    page.selectbox(key=f"{KS}_subscription").set_value(payments).run()
    shares = _frame(page, "consumer_name", "hashes", "share")
    assert set(shares["consumer_name"]) == {"payments-stuck", "payments-ok"}
    assert shares["hashes"].sum() == 65535  # the broker's ranges cover 1..65535
    assert int(_metrics(page)["Draining hashes"]) > 0
    draining = _frame(page, "consumer_name", "hash", "unack_msgs")
    assert set(draining["consumer_name"]) == {"payments-stuck"}


def test_demo_payments_drain_hashes_at_the_broker_after_the_polls(demo_run: DemoRun) -> None:
    """The demo's own reading of the broker's stats (what it acts on to keep the showcase)
    sees payments-by-account draining, as the stored polls did."""
    assert demo_run.draining > 0
    stuck_poll(demo_run.store)


def test_demo_key_lookup_names_a_connected_consumer(app: AppTest) -> None:
    page = plugin_page("key-shared-map", timeout=60)
    page.text_input(key=f"{KS}_key").input("customer-0").run()
    metrics = _metrics(page)
    assert 1 <= int(metrics["Sticky hash"]) <= 65535
    assert metrics["Consumer"] != "none"


def test_demo_stuck_hashes_page_names_the_stuck_payments_hashes(
    demo_store: Path, app: AppTest
) -> None:
    page = plugin_page("stuck-hashes", timeout=60, state=stuck_poll(demo_store))
    assert not page.exception
    hashes = _frame(page, "hash", "state", "consumer_name")
    assert any(f"/{PAYMENTS}" in t for t in hashes["topic"])
    assert "payments-by-account" in set(hashes["subscription"])


def test_demo_failover_page_matches_the_broker(app: AppTest) -> None:
    page = plugin_page("failover-assignment", timeout=60)
    assert not page.exception
    group = page.selectbox(key="analysis_failover-assignment_subscription")
    label = next(o for o in group.options if o and o.startswith("events-failover @ "))
    group.set_value(label).run()
    parts = _frame(page, "observed", "modulo", "consistent_hashing")
    assert list(parts["partition_index"]) == list(range(6))
    # the broker's active consumers are the ones the modulo rule predicts
    assert list(parts["observed"]) == list(parts["modulo"])


def test_demo_bundles_and_subscriptions_pages_have_rows(app: AppTest) -> None:
    page = plugin_page("bundle-ownership", timeout=60)
    assert not page.exception
    assert not any("No bundles" in i.value for i in page.info)
    page = plugin_page("subscription-status", timeout=60)
    assert not page.exception
    assert len(page.dataframe) >= 1


def test_demo_partition_topics_are_recognised(demo_store: Path) -> None:
    topics = Store(demo_store).read_latest("topics").to_pandas()
    parts = sorted(partition_index(t) for t in topics["topic"] if f"/{EVENTS}-" in t)
    assert parts == list(range(6))


@pytest.mark.timeout(1500)  # five Spark jobs in turn, each up to 150 s seen on a loaded machine
def test_demo_history_pages_show_what_the_spark_jobs_computed(
    demo_store: Path, app: AppTest
) -> None:
    """Every built-in Spark analysis runs as a job on the demo's polls (the job worker's step,
    on this run's local Spark session), and its History page draws the stored result."""
    from pulsar_lens.plugins.registry import discover
    from pulsar_lens.plugins.spark import session
    from pulsar_lens.plugins.spark.worker import JobWorker

    session.get("local[2]")
    spark = [p for p in discover(entry_points=False, plugin_dirs=[]) if p.engine == "spark"]
    assert spark, "no built-in Spark analysis is registered"
    worker = JobWorker(Store(demo_store), demo_store, spark, every=0.0)
    ran = {}
    for _ in range(len(spark) + 1):  # one scheduled round: a job per plugin
        job = worker.step()
        if job is None:
            break
        ran[job.plugin] = job
    assert {p.name for p in spark} == set(ran)
    assert all(job.state == "done" for job in ran.values()), ran
    for loaded in spark:
        page = plugin_page(loaded.name, timeout=60)
        assert not page.exception and not page.error, loaded.name
        assert any("computed by a Spark job" in c.value for c in page.caption), loaded.name
    episodes = plugin_page("stuck-hash-history", timeout=60)
    held = _frame(episodes, "hash", "consumer_name", "polls")
    assert any(f"/{PAYMENTS}" in t for t in held["topic"])  # the payments consumer's hashes
