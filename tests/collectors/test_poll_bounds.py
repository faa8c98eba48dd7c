"""The poll is bounded: by a deadline for the whole poll, a deadline and a size cap for each
answer, and a budget of per-topic calls rotated over the topics, against a loopback fake."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.poll import DetailRotation, poll
from pulsar_lens.core.store import Store
from tests.fake_admin import FakeAdmin, Seen
from tests.lens_cli import ROOT, run_lens

BULK = "/admin/v2/broker-stats/topics"
TRICKLE_LIMIT = 600  # seconds a trickling answer could last: far past any deadline


def trickle(seen: Seen) -> tuple[int, dict[str, str], Iterator[bytes]]:
    def drip() -> Iterator[bytes]:
        yield b"{"
        for _ in range(TRICKLE_LIMIT * 5):
            time.sleep(0.2)
            yield b" "

    return 200, {"Content-Type": "application/json"}, drip()


def huge(seen: Seen) -> tuple[int, dict[str, str], Iterator[bytes]]:
    def chunks() -> Iterator[bytes]:  # 200 MiB, made as it is sent, never held whole
        yield b'{"public/default": {"x": "'
        block = b"a" * (1024 * 1024)
        for _ in range(200):
            yield block
        yield b'"}}'

    return 200, {"Content-Type": "application/json"}, chunks()


def test_a_trickling_answer_cannot_hold_collect_once_past_its_deadline(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with FakeAdmin() as fake:
        fake.rule(BULK, trickle)
        env = {"PULSAR_ADMIN_URL": fake.url, "PULSAR_LENS_POLL_DEADLINE": "4s"}
        # the process's start is not the poll's: a slow one on a busy machine is no failure
        done = run_lens("collect", "--once", "--store", str(store), env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    polled = Store(store).snapshots()
    took = json.loads(polled["durations_json"].iloc[0])["total"]
    # the answer would trickle for 600 s; the poll's own clock says the deadline cut it
    assert took < 40, f"the poll took {took:.1f}s with a 4s poll deadline"
    errors = json.loads(polled["errors_json"].iloc[0])
    assert any("deadline passed" in str(e) for e in errors)  # recorded, and the rest stored
    assert Store(store).read_latest("topics").num_rows > 0


def test_an_answer_over_the_size_cap_is_refused_without_being_held(tmp_path: Path) -> None:
    with FakeAdmin() as fake:
        fake.rule(BULK, huge)
        # Linux carries a process's peak RSS across fork and exec, so the collect process
        # is started from a small parent that reports its child's peak (RUSAGE_CHILDREN)
        script = (
            "import resource, subprocess, sys\n"
            "done = subprocess.run([sys.executable, '-m', 'pulsar_lens.cli.main', *sys.argv[1:]])\n"
            "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "print('maxrss_kib', peak)\n"
            "sys.exit(done.returncode)\n"
        )
        argv = [sys.executable, "-c", script, "collect", "--once", "--store", str(tmp_path)]
        done = subprocess.run(
            argv,
            cwd=ROOT,
            # 64 MiB, below the default, so that a 200 MiB answer is over it
            env={
                "PATH": "/usr/bin:/bin",
                "PULSAR_ADMIN_URL": fake.url,
                "PULSAR_LENS_MAX_RESPONSE": "64",
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    rss_mib = int(done.stdout.split("maxrss_kib")[1].split()[0]) / 1024
    assert rss_mib < 300, f"collect held {rss_mib:.0f} MiB for a 200 MiB answer capped at 64"
    errors = json.loads(Store(tmp_path).snapshots()["errors_json"].iloc[0])
    (too_large,) = [e for e in errors if "larger than 64 MiB" in str(e)]
    assert "set PULSAR_LENS_MAX_RESPONSE=128 or more" in str(too_large)


def key_shared_bulk(count: int) -> Any:
    def edit(payload: Any) -> Any:
        (bundles,) = [v for k, v in payload.items() if k == "public/default"]
        bundle = next(iter(bundles.values()))
        template = {
            "msgRateIn": 1.0,
            "subscriptions": {
                "ks": {"type": "Key_Shared", "msgBacklog": 0, "consumers": [{"consumerName": "c"}]}
            },
        }
        for i in range(count):
            bundle["persistent"][f"persistent://public/default/ks-{i}"] = copy.deepcopy(template)
        return payload

    return edit


def test_ten_thousand_key_shared_topics_make_a_bounded_poll_and_rotate(tmp_path: Path) -> None:
    with FakeAdmin() as fake:
        fake.mutate(BULK, key_shared_bulk(10_000))
        client = AdminClient(fake.url, retries=0)
        rotation = DetailRotation()
        detailed: list[set[str]] = []
        for _ in range(2):
            before = len(fake.requests)
            snap = poll(client, detail_budget=200, rotation=rotation)
            stats_calls = {s.path for s in fake.requests[before:] if s.path.endswith("/stats")}
            detailed.append({p for p in stats_calls if "/ks-" in p})
            assert len(fake.requests) - before <= 200 + 40  # the bound is in calls, not time
            assert len(snap.topics) >= 10_000
            notes = [e.message for e in snap.errors if e.endpoint == "topic_stats"]
            assert any("deferred to the next polls" in n for n in notes)
    assert len(detailed[0]) == len(detailed[1]) > 150
    assert not detailed[0] & detailed[1]  # the second poll detailed other topics


def loopback_ids(count: int, port: int) -> list[str]:
    """`count` distinct broker ids that all reach 127.0.0.1:`port`: zero-padded octets
    (`127.0.00.001`), which the resolver reads as 127.0.0.1."""
    ids = []
    for i in range(count):
        a, b, c = i % 22, i // 22 % 22, i // 484
        ids.append(f"127.{'0' * a}0.{'0' * b}0.{'0' * c}1:{port}")
    return ids


def test_ten_thousand_brokers_make_a_bounded_poll_said_in_a_few_lines(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with FakeAdmin() as fake:
        port = int(fake.host.rsplit(":", 1)[1])
        brokers = loopback_ids(10_000, port)
        fake.mutate("/admin/v2/brokers/standalone", lambda _: brokers)
        owned = "/admin/v2/brokers/standalone/127.0.0.1:8080/ownedNamespaces"
        for broker in brokers:  # each broker is asked for its bundles on its own path
            fake.rule(owned.replace("127.0.0.1:8080", broker), lambda _s: (200, {}, b"{}"))
        env = {"PULSAR_ADMIN_URL": fake.url, "PULSAR_LENS_POLL_DEADLINE": "5s"}
        done = run_lens("collect", "--once", "--store", str(store), env=env, timeout=300)
        contacted = {s.headers.get("Host") for s in fake.seen("/admin/v2/broker-stats/")}
    assert done.returncode == 0, done.stderr[-3000:]
    row = Store(store).snapshots().iloc[0]
    took = json.loads(row["durations_json"])["total"]
    assert took < 5 + 10, f"the poll took {took:.1f}s with a 5s deadline"
    assert len(contacted) <= 1_000
    errors = json.loads(row["errors_json"])
    cut = [e["message"] for e in errors if e["endpoint"] == "brokers"]
    assert cut == [cut[0]] and "9000 of the 10000 brokers listed were not contacted" in cut[0]
    assert len(errors) < 50, errors[:60]  # what was cut or skipped is said once, not per call
    assert done.stderr.count("\n") < 100, done.stderr[-3000:]


def test_collect_deadline_not_set_follows_a_longer_interval(tmp_path: Path) -> None:
    from pulsar_lens.collectors.health import read_health

    deadlines = {}
    with FakeAdmin() as fake:
        for name, env in (("unset", {}), ("set", {"PULSAR_LENS_POLL_DEADLINE": "90s"})):
            store = tmp_path / name
            argv = ("collect", "--max-polls", "1", "--interval", "10m", "--store", str(store))
            done = run_lens(*argv, env={"PULSAR_ADMIN_URL": fake.url, **env}, timeout=300)
            assert done.returncode == 0, done.stderr
            report = read_health(store)
            assert report is not None
            deadlines[name] = report.loops[0].deadline
    assert deadlines == {"unset": 600.0, "set": 90.0}
