"""Two real Pulsar 4.0 brokers as two clusters of one settings file: the default standalone
("plain", no authentication) and a second one with token authentication ("secured"), both
calling themselves `standalone`. `pulsar-lens collect --config` polls them side by side into
one store; each keeps its name, its credentials, its own snapshots and its own analyses; the
dashboard shows the chosen one; `config check` tells an accepted token from a refused one.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.clusterview import ClusterView
from pulsar_lens.core.store import Store
from pulsar_lens.dashboard.data import CLUSTER_KEY
from pulsar_lens.lab.localpulsar import LocalPulsar, free_port
from pulsar_lens.lab.security import BROKER_ROLE, TokenKeys, secured_settings
from pulsar_lens.plugins.results import ResultStore
from tests.dashboard.conftest import APP
from tests.lens_cli import run_lens
from tests.live.lens_polls import new_topic

ADMIN_ROLE = "lens-admin"
STRAY_TOKEN = "stray-environment-token-9b2"  # set in the environment, taken by no cluster


@dataclass(frozen=True)
class Secured:
    broker: LocalPulsar
    keys: TokenKeys
    token: str


@dataclass(frozen=True)
class Collected:
    store: Store
    out: str
    topics: dict[str, str]  # cluster name -> the topic created on that cluster only
    brokers: dict[str, str]  # cluster name -> its broker id


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    folder = tmp_path_factory.mktemp("secured-cluster")
    keys = TokenKeys.create(folder)
    broker_token = keys.sign(BROKER_ROLE)
    settings = secured_settings(keys, super_users=(ADMIN_ROLE,), broker_token=broker_token)
    broker = LocalPulsar(settings=settings, admin_token=broker_token).start(timeout=240)
    try:
        yield Secured(broker, keys, keys.sign(ADMIN_ROLE))
    finally:
        broker.stop()


def config_file(folder: Path, pulsar: LocalPulsar, secured: Secured, token: str) -> Path:
    token_file = folder / "secured.token"
    token_file.write_text(token + "\n")
    path = folder / "lens.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            [[clusters]]
            name = "plain"
            admin_url = "{pulsar.admin_url}"

            [[clusters]]
            name = "secured"
            admin_url = "{secured.broker.admin_url}"
            token_file = "{token_file}"
            """
        )
    )
    return path


def create_topic(broker: LocalPulsar, token: str | None, prefix: str) -> str:
    topic = new_topic(prefix)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = broker.admin_url + topic.replace("persistent://", "/admin/v2/persistent/")
    resp = requests.put(url, headers=headers, timeout=30)
    assert resp.status_code in (200, 204), resp.text
    return topic


@pytest.fixture(scope="module")
def collected(
    pulsar: LocalPulsar, secured: Secured, tmp_path_factory: pytest.TempPathFactory
) -> Collected:
    folder = tmp_path_factory.mktemp("two-clusters")
    topics = {
        "plain": create_topic(pulsar, None, "only-plain"),
        "secured": create_topic(secured.broker, secured.token, "only-secured"),
    }
    config = config_file(folder, pulsar, secured, secured.token)
    store = folder / "store"
    done = run_lens(
        "collect",
        "--config",
        str(config),
        "--store",
        str(store),
        "--max-polls",
        "2",
        "--interval",
        "2s",
        env={"PULSAR_ADMIN_TOKEN": STRAY_TOKEN, "PULSAR_LENS_SPARK_JOBS": "0"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert STRAY_TOKEN not in done.stdout + done.stderr
    assert secured.token not in done.stdout + done.stderr
    brokers = {
        "plain": pulsar.admin_url.removeprefix("http://"),
        "secured": secured.broker.admin_url.removeprefix("http://"),
    }
    return Collected(Store(store), done.stdout, topics, brokers)


def test_both_clusters_polled_side_by_side_under_their_names(collected: Collected) -> None:
    lines = collected.out.splitlines()
    for name in ("plain", "secured"):
        beats = [line for line in lines if f" cluster={name} " in line]
        assert len(beats) == 2 and all(" errors=0 " in b for b in beats), collected.out
    assert sorted(collected.store.snapshots()["cluster"]) == ["plain"] * 2 + ["secured"] * 2


def test_each_clusters_snapshots_hold_its_own_broker_and_topics(collected: Collected) -> None:
    seen = {}
    for name, other in (("plain", "secured"), ("secured", "plain")):
        view = ClusterView(collected.store, name)
        assert len(view.snapshots()) == 2
        brokers = view.read_latest("brokers")["broker_id"].to_pylist()
        assert brokers == [collected.brokers[name]]
        topics = set(view.read_latest("topics")["topic"].to_pylist())
        assert collected.topics[name] in topics and collected.topics[other] not in topics
        seen[name] = set(view.snapshots()["snapshot_id"])
    assert not seen["plain"] & seen["secured"]


def test_plugins_analysed_each_clusters_newest_snapshot(collected: Collected) -> None:
    newest = {
        ClusterView(collected.store, name).latest_snapshot_id() for name in ("plain", "secured")
    }
    analysed: dict[str, set[str]] = {}
    for _, meta in ResultStore(collected.store.root).entries():
        if meta["status"] == "ok":
            analysed.setdefault(str(meta["plugin"]), set()).add(str(meta["snapshot_ids"][-1]))
    assert "subscription-status" in analysed
    for plugin, ids in analysed.items():
        assert newest <= ids, plugin


def test_dashboard_shows_the_chosen_clusters_latest_snapshot(
    collected: Collected, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULSAR_LENS_STORE", str(collected.store.root))
    monkeypatch.setenv("PULSAR_LENS_POLL_INTERVAL", "1h")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", "")
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert sorted(at.sidebar.selectbox(key=CLUSTER_KEY).options) == ["plain", "secured"]
    for name in ("plain", "secured"):
        at.sidebar.selectbox(key=CLUSTER_KEY).set_value(name).run()
        assert not at.exception
        assert f"**Cluster** {name}" in [m.value for m in at.sidebar.markdown]  # text, not code
        shown = [
            set(frame.value["broker_id"]) for frame in at.dataframe if "broker_id" in frame.value
        ]
        assert shown == [{collected.brokers[name]}]


def test_config_check_accepts_the_right_token_and_names_a_refused_one(
    pulsar: LocalPulsar, secured: Secured, tmp_path: Path
) -> None:
    good = config_file(tmp_path, pulsar, secured, secured.token)
    done = run_lens("config", "check", "--json", "--config", str(good), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert [c["check"]["ok"] for c in report["clusters"]] == [True, True]
    assert report["clusters"][1]["check"]["brokers"] == {
        "standalone": [secured.broker.admin_url.removeprefix("http://")]
    }
    wrong = secured.keys.sign("someone-else-entirely")
    bad = config_file(tmp_path, pulsar, secured, wrong)
    done = run_lens("config", "check", "--config", str(bad), timeout=120)
    assert done.returncode == 1
    line = next(x for x in done.stdout.splitlines() if "FAILED: GET" in x)
    assert "401" in line or "403" in line, done.stdout
    assert wrong not in done.stdout + done.stderr


def test_an_unreachable_cluster_never_stops_the_other(pulsar: LocalPulsar, tmp_path: Path) -> None:
    config = tmp_path / "lens.toml"
    config.write_text(
        f'[[clusters]]\nname = "plain"\nadmin_url = "{pulsar.admin_url}"\n'
        f'[[clusters]]\nname = "gone"\nadmin_url = "http://127.0.0.1:{free_port()}"\n'
    )
    store = tmp_path / "store"
    argv = ("--config", str(config), "--store", str(store), "--max-polls", "2")
    done = run_lens("collect", *argv, "--interval", "1s", timeout=300)
    assert done.returncode == 1
    assert "cluster gone: could not reach its admin API" in done.stderr
    assert list(Store(store).snapshots()["cluster"]) == ["plain", "plain"]
