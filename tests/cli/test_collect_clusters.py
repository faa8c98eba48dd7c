"""`pulsar-lens collect` over the settings file's clusters, with fake snapshot sources:
names, one store, per-cluster analyses, exit codes and the flags that need one cluster."""

from __future__ import annotations

import argparse
import datetime as dt
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.cli.collect_cmd import Source
from pulsar_lens.cli.main import build_parser
from pulsar_lens.collectors.health import read_health
from pulsar_lens.core.clusterview import ClusterView
from pulsar_lens.core.config import CLUSTER_KEYS, ClusterSettings
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.results import ResultStore
from tests.core.snapshots import make_snapshot, unreachable_snapshot

CONFIG = """\
[[clusters]]
name = "east"
admin_url = "http://east:8080"
token = "east-only-token"

[[clusters]]
name = "west"
admin_url = "http://west:8080"
"""
CLUSTERS = ("east", "west")


class Sources:
    """Fake sources by admin URL: `topics` topics each, or unreachable; remembers the calls."""

    def __init__(self, topics: dict[str, int | None]) -> None:
        self.topics = topics
        self.calls: list[dict[str, Any]] = []

    def __call__(self, admin_url: str, namespaces: Sequence[str] | None, **kw: Any) -> Source:
        self.calls.append({"admin_url": admin_url, **kw})
        count = self.topics[admin_url]
        name = kw["cluster"].name

        def poll() -> Snapshot:
            now = dt.datetime.now(dt.UTC)
            if count is None:
                return unreachable_snapshot(at=now)
            # the broker reports "standalone"; the source names it as configured
            return make_snapshot(at=now, cluster=name, topics=count)

        return Source(poll=poll)


def parse(tmp_path: Path, *argv: str, sources: Sources, config: str = CONFIG) -> argparse.Namespace:
    path = tmp_path / "lens.toml"
    path.write_text(textwrap.dedent(config))
    store = str(tmp_path / "store")
    args = build_parser().parse_args(["collect", "--config", str(path), "--store", store, *argv])
    args.source_factory = sources
    return args


def test_collect_polls_every_cluster_of_the_file_into_one_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = Sources({"http://east:8080": 2, "http://west:8080": 4})
    args = parse(tmp_path, "--max-polls", "2", "--interval", "10ms", sources=sources)
    assert args.func(args) == 0
    store = Store(tmp_path / "store")
    assert sorted(store.snapshots()["cluster"]) == ["east", "east", "west", "west"]
    assert ClusterView(store, "east").read_latest("topics").num_rows == 2
    assert ClusterView(store, "west").read_latest("topics").num_rows == 4
    lines = capsys.readouterr().out.splitlines()
    assert sum(" cluster=east " in line for line in lines) == 2
    assert sum(" cluster=west " in line for line in lines) == 2
    # each cluster connects with its own settings: the token is east's alone
    token = {c["admin_url"]: c["cluster"].token for c in sources.calls}
    assert token["http://east:8080"].reveal() == "east-only-token"
    assert token["http://west:8080"] is None


def test_collect_analyses_each_clusters_snapshot_on_its_own(tmp_path: Path) -> None:
    sources = Sources({"http://east:8080": 2, "http://west:8080": 4})
    args = parse(tmp_path, "--once", sources=sources)
    assert args.func(args) == 0
    store = Store(tmp_path / "store")
    newest = {c: ClusterView(store, c).latest_snapshot_id() for c in ("east", "west")}
    analysed: dict[str, set[str]] = {}
    for _, meta in ResultStore(store.root).entries():
        analysed.setdefault(str(meta["plugin"]), set()).add(str(meta["snapshot_ids"][-1]))
    assert analysed, "no plugin result was stored"
    for plugin, newest_ids in analysed.items():
        assert newest_ids == set(newest.values()), plugin


def test_collect_counts_a_poll_replaced_only_by_one_of_its_own_cluster(tmp_path: Path) -> None:
    """One results pass analyses every cluster's newest snapshot: east's poll and west's,
    however they fall into passes, leave none unanalysed in the health file."""
    sources = Sources({"http://east:8080": 2, "http://west:8080": 4})
    args = parse(tmp_path, "--once", sources=sources)
    assert args.func(args) == 0
    report = read_health(tmp_path / "store")
    assert report is not None and report.analyses is not None
    assert report.analyses.passes in (1, 2)
    assert (report.analyses.skipped, report.analyses.skipped_total) == (0, 0)


def test_collect_goes_on_when_one_cluster_is_unreachable_and_exits_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = Sources({"http://east:8080": 2, "http://west:8080": None})
    args = parse(tmp_path, "--max-polls", "2", "--interval", "10ms", sources=sources)
    assert args.func(args) == 1
    store = Store(tmp_path / "store")
    assert list(store.snapshots()["cluster"]) == ["east", "east"]
    err = capsys.readouterr().err
    assert "cluster west: could not reach its admin API" in err and "cluster east" not in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--once", "--admin-url", "http://x:8080"), "--admin-url picks one cluster"),
        (("--once", "--sample-keys"), "work on one cluster"),
    ],
)
def test_collect_refuses_one_cluster_flags_with_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], expected: str
) -> None:
    sources = Sources({"http://east:8080": 2, "http://west:8080": 2})
    args = parse(tmp_path, *argv, sources=sources)
    assert args.func(args) == 2
    assert expected in capsys.readouterr().err and sources.calls == []


def test_collect_names_a_single_file_cluster_as_configured(tmp_path: Path) -> None:
    config = '[[clusters]]\nname = "prod-eu"\nadmin_url = "http://east:8080"\n'
    sources = Sources({"http://east:8080": 3})
    args = parse(tmp_path, "--once", sources=sources, config=config)
    assert args.func(args) == 0
    assert list(Store(tmp_path / "store").snapshots()["cluster"]) == ["prod-eu"]


def test_serve_children_of_a_settings_file_with_several_clusters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pulsar_lens.cli.serve_cmd import collect_child, streamlit_child
    from pulsar_lens.core.settings import Settings

    path = tmp_path / "lens.toml"
    path.write_text(f'plugin_dirs = ["{tmp_path}/plugins"]\n' + CONFIG)
    monkeypatch.setenv("PULSAR_LENS_CONFIG", str(path))
    settings = Settings.from_env()
    interval = dt.timedelta(seconds=5)
    collector = collect_child(None, tmp_path, interval, config=settings.config_file)
    assert collector.argv[collector.argv.index("--config") + 1] == str(path)
    assert collector.env is not None and "PULSAR_ADMIN_URL" not in collector.env
    dashboard = streamlit_child(
        tmp_path, interval, address="127.0.0.1", port=8501, settings=settings
    )
    assert dashboard.env is not None
    assert "PULSAR_LENS_CONFIG" not in dashboard.env  # the file holds east's token
    assert dashboard.env["PULSAR_LENS_PLUGIN_DIRS"] == f"{tmp_path}/plugins"


def _job_worker_environ(tmp_path: Path) -> dict[str, str]:
    """The environment a job worker started from this process's settings runs with."""
    import json
    import sys

    from pulsar_lens.core.settings import Settings
    from pulsar_lens.plugins.spark.worker import WorkerProcess

    seen = tmp_path / "env.json"
    dump = f"import json, os; open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))"
    worker = WorkerProcess(
        tmp_path, argv=[sys.executable, "-c", dump], environ=Settings.from_env().file_environ()
    )
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while not (seen.exists() and seen.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        env: dict[str, str] = json.loads(seen.read_text())
        return env
    finally:
        worker.close()


def test_collect_hands_file_keys_to_the_job_worker_by_its_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job worker is not given the settings file (it holds tokens): the keys it reads
    (plugin folders, Spark master) go into its environment, rendered from the settings, and
    this process's own environment is left as it was."""
    import os

    path = tmp_path / "lens.toml"
    path.write_text(f'plugin_dirs = ["{tmp_path}/p"]\nspark_master = "spark://m:7077"\n' + CONFIG)
    monkeypatch.setenv("PULSAR_LENS_SPARK_MASTER", "local[1]")  # the environment wins
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", "restored-after-the-test")
    monkeypatch.delenv("PULSAR_LENS_PLUGIN_DIRS")
    monkeypatch.setenv("PULSAR_LENS_CONFIG", str(path))
    env = _job_worker_environ(tmp_path)
    assert env["PULSAR_LENS_PLUGIN_DIRS"] == f"{tmp_path}/p"
    assert env["PULSAR_LENS_SPARK_MASTER"] == "local[1]"
    assert "PULSAR_LENS_CONFIG" not in env
    assert "PULSAR_LENS_PLUGIN_DIRS" not in os.environ


def test_the_job_worker_gets_a_spark_connect_master_with_its_token_and_no_other_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark Connect master with `;token=` is a credential variable, kept from every child,
    but the job worker runs its analyses on that session: it is handed the master (and the
    admin token stays out), with or without a settings file."""
    import json

    master = "sc://spark:15002/;token=connect-tok-3391"
    monkeypatch.delenv("PULSAR_LENS_CONFIG", raising=False)
    monkeypatch.setenv("PULSAR_LENS_SPARK_MASTER", master)
    monkeypatch.setenv("PULSAR_ADMIN_TOKEN", "admin-tok-7720")
    env = _job_worker_environ(tmp_path)
    assert env["PULSAR_LENS_SPARK_MASTER"] == master
    assert "PULSAR_ADMIN_TOKEN" not in env and "admin-tok-7720" not in json.dumps(env)


def test_collect_probes_refused_without_mutations_before_any_poll(tmp_path: Path) -> None:
    from pulsar_lens.core.errors import MutationsDisabled

    sources = Sources({"http://east:8080": 2, "http://west:8080": 2})
    args = parse(tmp_path, "--once", "--probe", "public/default", sources=sources)
    with pytest.raises(MutationsDisabled, match="PULSAR_LENS_ALLOW_MUTATIONS"):
        args.func(args)
    assert sources.calls == []


ENV_SECRETS = {
    "PULSAR_CLIENT_TOKEN": "env-client-token",
    "PULSAR_ADMIN_TOKEN": "env-admin-token",
    "PULSAR_LENS_OAUTH2_PRIVATE_KEY": "/env/oauth2-key.json",
}


@pytest.mark.parametrize("variable", sorted(ENV_SECRETS))
def test_collect_probes_of_each_cluster_carry_its_settings_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    from pulsar_lens.cli.probing import probe_hooks
    from pulsar_lens.core.settings import Settings

    monkeypatch.setenv("PULSAR_LENS_ALLOW_MUTATIONS", "1")
    monkeypatch.setenv(variable, ENV_SECRETS[variable])  # the single cluster's: here no one's
    config = CONFIG.replace(
        'token = "east-only-token"', 'token = "east-only-token"\nservice_url = "pulsar://east:6650"'
    )
    args = parse(tmp_path, "--probe", "public/default", sources=Sources({}), config=config)
    settings = Settings.from_env(config=args.config)
    east, west = (
        probe_hooks(args, settings, Store(tmp_path / "s"), str(c.admin_url), cluster=c)
        for c in settings.clusters
    )
    assert east is not None and west is not None
    assert east.token is not None and east.token.reveal() == "east-only-token"
    assert (east.service_url, west.service_url) == ("pulsar://east:6650", None)
    assert west.token is None
    for probes, cluster in zip((east, west), settings.clusters, strict=True):
        assert probes.connection is cluster  # its own settings, none of the environment's
        assert ENV_SECRETS[variable] not in revealed(cluster)
        assert "east-only-token" not in repr(probes)
    assert "east-only-token" not in revealed(settings.clusters[1])


def revealed(cluster: ClusterSettings) -> list[str]:
    """Every connection value of `cluster`, secrets in clear."""
    values = [cluster.value(key) for key in CLUSTER_KEYS]
    return [v.reveal() if isinstance(v, Secret) else str(v) for v in values if v is not None]


def test_collect_schedules_the_spark_jobs_of_each_cluster(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from pulsar_lens.plugins.spark.jobs import JobQueue
    from tests.fake_admin import FakeAdmin
    from tests.lens_cli import ROOT, clean_environ

    store = tmp_path / "store"
    queue = JobQueue(store)
    with FakeAdmin() as admin:
        config = tmp_path / "lens.toml"
        config.write_text(
            "".join(f'[[clusters]]\nname = "{c}"\nadmin_url = "{admin.url}"\n' for c in CLUSTERS)
        )
        env = clean_environ()
        argv = [sys.executable, "-m", "pulsar_lens.cli.main", "collect", "--config", str(config)]
        argv += ["--store", str(store), "--interval", "1s"]
        with subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        ) as proc:
            try:
                deadline = time.monotonic() + 180
                scheduled: set[str | None] = set()
                while time.monotonic() < deadline and proc.poll() is None:
                    paths = queue.statuses.glob("*.json") if queue.statuses.is_dir() else []
                    jobs = [queue.status(path.stem) for path in paths]
                    scheduled = {job.cluster for job in jobs if job is not None}
                    if scheduled >= set(CLUSTERS):
                        break
                    time.sleep(0.5)
            finally:
                proc.send_signal(signal.SIGTERM)
                _, err = proc.communicate(timeout=120)
    assert scheduled >= set(CLUSTERS), f"jobs scheduled for {scheduled}; stderr:\n{err[-3000:]}"
    assert "run as jobs in a job worker process" in err
