"""Soak: `pulsar-lens collect --interval 5s` against a live standalone for SOAK_SECONDS (10
minutes) while consumers join and leave all the time, and beside it a second collect with a
one-minute PULSAR_LENS_RETENTION.

The first collector's RSS, open files (/proc/PID/fd) and threads (/proc/PID/status) are sampled
at every heartbeat. The warm-up (WARM_UP_SECONDS) lasts until the store holds as many snapshots
as the deepest light plugin reads (its `history`, 60 polls), as the analyses' working set
grows until then; a minute more. After it they must stay within:
- RSS: no sample more than RSS_GROWTH_MIB above the early level (the median of the first
  quarter of the samples after the warm-up: the working set still settles for some minutes
  after it, so a single first sample may sit in a dip); in a run of an hour, the late level
  (the median of the last quarter) at most RSS_LEVEL_GROWTH_MIB above the early one. The
  slope over the second half is reported, not judged: a plateau with one step up and back
  in the middle reads as +50 MiB an hour over half an hour;
- open files and threads: their late level (the median of the last quarter) at most FD_GROWTH
  and THREAD_GROWTH above the early one; a read of a table window holds several files open
  and pyarrow starts threads as it needs them, so single samples may stand above the level,
  at most FD_PEAK and THREAD_PEAK.
Its store gives the bytes one poll adds and so a day at this rate (x 17,280), as written and
once the day is compacted: compaction merges a closed day's files when the day changes, so it
is shown on a copy of the store with `Store.compact_closed(before=tomorrow)`, which is the
call the loop makes at midnight; every snapshot still reads after it.

The second collector's store must stop growing: once retention has had time to act (one
retention, plus the housekeeping period, a quarter of it, plus two polls) the snapshots it
holds stay at most what that span can hold, and its size shows no trend (the mean of the
last third of the samples since then is within RETAINED_SLACK of the first third's; single
samples vary with what each poll and its analyses wrote), while the first store keeps growing.

Figures: artifacts/reliability/soak.json.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import shutil
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.core import logs
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar
from reliability.harness import (
    MIB,
    Collector,
    Sample,
    collecting,
    create_topics,
    lens_argv,
    lens_env,
    sample_process,
    scale,
    series,
    slope_per_hour,
    tree_rss_bytes,
    tree_size,
    write_figures,
)

SOAK_SECONDS = scale("SOAK_SECONDS", 600)
INTERVAL_SECONDS = 5


def longest_history() -> int:
    """The most snapshots a light plugin reads per analysis: the collector's working set
    grows with the store until it holds that many."""
    from pulsar_lens.plugins.registry import discover

    return max(p.plugin.history for p in discover() if p.plugin.engine != "spark")


# warm-up: until the analyses' history is full (60 polls, 5 minutes), plus a minute
WARM_UP_SECONDS = min(longest_history() * INTERVAL_SECONDS + 60, SOAK_SECONDS * 3 // 5)
RSS_GROWTH_MIB = 64
FD_GROWTH, FD_PEAK, THREAD_GROWTH, THREAD_PEAK = 8, 48, 6, 32
RSS_LEVEL_GROWTH_MIB = 32
LEVELS_FROM_SECONDS = 3600  # in a shorter run memory still settles in the first quarter
RETENTION_SECONDS = 60
RETAINED_SLACK = 1.25
POLLS_PER_DAY = 86_400 // INTERVAL_SECONDS  # 17,280
TOPICS, SUBSCRIPTIONS = 50, 2
CHURN_TOPICS, MOST_PER_TOPIC = 20, 4
BEAT = re.compile(r"topics=(\d+) subs=(\d+) requests=(\d+) errors=(\d+) duration=([\d.]+)s")


class Churn:
    """Consumers joining and leaving: every ~0.5 s one joins a churned topic (Key_Shared or
    Failover on subscription `churn-*`) or, where MOST_PER_TOPIC are, the oldest leaves;
    a producer sends keyed messages at ~20/s that the consumers ack. Ends at `stop()`."""

    def __init__(self, service_url: str, topics: list[str]) -> None:
        self.client = logs.pulsar_client(service_url, operation_timeout_seconds=30)
        self.topics = topics
        self.joined = self.left = self.sent = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._churn, daemon=True),
            threading.Thread(target=self._produce, daemon=True),
        ]

    def __enter__(self) -> Churn:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)
        self.client.close()

    def _churn(self) -> None:
        import pulsar

        rng = random.Random(5)
        on: dict[str, list[Any]] = {t: [] for t in self.topics}
        n = 0
        while not self._stop.wait(rng.uniform(0.25, 0.75)):
            topic = rng.choice(self.topics)
            key_shared = self.topics.index(topic) % 2 == 0
            try:
                if len(on[topic]) >= MOST_PER_TOPIC or (on[topic] and rng.random() < 0.4):
                    on[topic].pop(0).close()
                    self.left += 1
                else:
                    n += 1
                    on[topic].append(
                        self.client.subscribe(
                            topic,
                            "churn-ks" if key_shared else "churn-fo",
                            consumer_type=pulsar.ConsumerType.KeyShared
                            if key_shared
                            else pulsar.ConsumerType.Failover,
                            consumer_name=f"churn-{n}",
                            message_listener=lambda c, m: c.acknowledge(m),
                        )
                    )
                    self.joined += 1
            except Exception as exc:  # note it and go on: the collector is what is tested
                self.failures.append(f"{type(exc).__name__}: {exc}")
        for consumers in on.values():
            for c in consumers:
                c.close()

    def _produce(self) -> None:
        producers = [self.client.create_producer(t, batching_enabled=False) for t in self.topics]
        i = 0
        while not self._stop.wait(0.05):
            i += 1
            producers[i % len(producers)].send_async(
                f"m-{i}".encode(), None, partition_key=f"key-{i % 97}"
            )
            self.sent += 1
        for p in producers:
            p.flush()
            p.close()

    def stop(self) -> None:
        self._stop.set()


def store_counts(root: Path, races: list[str]) -> tuple[int, int]:
    """(snapshots in the index, bytes) of a store, read as the dashboard reads it while the
    collector writes and applies retention; an index file deleted between listing and
    reading (FileNotFoundError) is noted in `races` and the read made again."""
    for _ in range(5):
        try:
            return len(Store(root).snapshots()), tree_size(root)[0]
        except FileNotFoundError as exc:
            races.append(str(exc))
    raise AssertionError(f"the index kept changing under the read: {races[-5:]}")


def levels(values: list[float] | list[int]) -> tuple[float, float]:
    """(early, late) level of a series: the medians of its first and last quarter."""
    quarter = max(1, len(values) // 4)
    return statistics.median(values[:quarter]), statistics.median(values[-quarter:])


def every_minute(samples: list[tuple[float, int, int]]) -> list[dict[str, float]]:
    """One (second, snapshots, bytes) sample per minute of the run, for the figures."""
    shown, next_at = [], 0.0
    for at, snapshots, size in samples:
        if at >= next_at:
            shown.append({"second": round(at), "snapshots": snapshots, "bytes": size})
            next_at = at + 60
    return shown


@pytest.mark.timeout(SOAK_SECONDS + 900)
def test_soak_collect_under_consumer_churn(tmp_path: Path) -> None:
    figures: dict[str, Any] = {
        "soak_seconds": SOAK_SECONDS,
        "interval_seconds": INTERVAL_SECONDS,
        "warm_up_seconds": WARM_UP_SECONDS,
        "bounds": {
            "rss_growth_after_warm_up_mib": RSS_GROWTH_MIB,
            "rss_late_level_above_early_mib": RSS_LEVEL_GROWTH_MIB,
            "fd_level_growth_after_warm_up": FD_GROWTH,
            "fds_above_early_level_at_most": FD_PEAK,
            "thread_level_growth_after_warm_up": THREAD_GROWTH,
            "threads_above_early_level_at_most": THREAD_PEAK,
            "retained_size_slack": RETAINED_SLACK,
        },
    }
    main_store, kept_store = tmp_path / "store", tmp_path / "retained"
    samples: list[Sample] = []
    tree: list[int] = []
    beats: list[str] = []
    kept: list[tuple[float, int, int]] = []
    main_sizes: list[tuple[float, int]] = []
    holder: dict[str, Collector] = {}
    index_races: list[str] = []
    started = time.monotonic()

    def on_main(line: str) -> None:
        beats.append(line)
        pid = holder["main"].pid
        samples.append(sample_process(pid))
        tree.append(tree_rss_bytes(pid))
        main_sizes.append((time.monotonic() - started, tree_size(main_store)[0]))

    def on_kept(line: str) -> None:
        kept.append((time.monotonic() - started, *store_counts(kept_store, index_races)))

    with LocalPulsar() as pulsar:
        names = [f"persistent://public/default/soak-{i}" for i in range(TOPICS)]
        create_topics(pulsar.admin_url, names, SUBSCRIPTIONS, deadline=time.monotonic() + 300)
        common = ("--admin-url", pulsar.admin_url, "--interval", f"{INTERVAL_SECONDS}s")
        main = Collector(
            lens_argv("collect", *common, "--store", str(main_store)),
            lens_env(main_store),
            on_main,
            tmp_path / "collect.err",
        )
        retained = Collector(
            lens_argv("collect", *common, "--store", str(kept_store)),
            lens_env(
                kept_store,
                PULSAR_LENS_RETENTION=f"{RETENTION_SECONDS}s",
                PULSAR_LENS_SPARK_JOBS="0",  # the store's size is the point here
            ),
            on_kept,
            tmp_path / "retained.err",
        )
        holder["main"] = main
        with Churn(pulsar.service_url, names[:CHURN_TOPICS]) as churn:
            started = time.monotonic()
            deadline = started + SOAK_SECONDS
            with collecting(main), collecting(retained):
                while time.monotonic() < deadline:
                    assert main.process is not None and main.process.poll() is None, main.stderr()
                    assert retained.process is not None and retained.process.poll() is None
                    time.sleep(1)
                main_exit, kept_exit = main.stop(), retained.stop()
            churn.stop()
        figures["churn"] = {
            "consumers_joined": churn.joined,
            "consumers_left": churn.left,
            "messages_sent": churn.sent,
            "client_failures": len(churn.failures),
            "first_failures": churn.failures[:5],
        }

    # --- the collector's process --------------------------------------------------------
    parsed = [BEAT.search(b) for b in beats]
    errors = [int(m.group(4)) for m in parsed if m]
    durations = [float(m.group(5)) for m in parsed if m]
    warm = [s for s in samples if s.at - started >= WARM_UP_SECONDS]
    assert len(warm) >= 5, f"only {len(warm)} polls after the warm-up"
    rss = [s.rss_bytes / MIB for s in warm]
    fds, threads = [s.fds for s in warm], [s.threads for s in warm]
    figures["polls"] = len(beats)
    figures["seconds_between_polls"] = round(
        (samples[-1].at - samples[0].at) / max(1, len(samples) - 1), 2
    )
    figures["polls_with_errors"] = sum(1 for e in errors if e)
    figures["poll_duration_seconds"] = series(durations)
    figures["exit_codes"] = {"collect": main_exit, "retained": kept_exit}
    figures["rss_mib_all"] = series([s.rss_bytes / MIB for s in samples])
    figures["rss_mib_after_warm_up"] = series(rss)
    early_level, late_level = levels(rss)
    fd_levels, thread_levels = levels(fds), levels(threads)
    figures["fd_levels_early_late"] = fd_levels
    figures["thread_levels_early_late"] = thread_levels
    figures["rss_early_level_mib"] = round(early_level, 1)
    figures["rss_late_level_mib"] = round(late_level, 1)
    figures["rss_growth_after_warm_up_mib"] = round(max(rss) - early_level, 1)
    figures["rss_slope_after_warm_up_mib_per_hour"] = round(
        slope_per_hour([s.at for s in warm], rss), 1
    )
    # does memory level off? the slope over the run's second half, the collector alone and
    # with its Spark job worker (the process tree)
    half = [i for i, s in enumerate(samples) if s.at - started >= SOAK_SECONDS / 2]
    figures["rss_slope_last_half_mib_per_hour"] = round(
        slope_per_hour([samples[i].at for i in half], [samples[i].rss_bytes / MIB for i in half]),
        1,
    )
    figures["tree_rss_slope_last_half_mib_per_hour"] = round(
        slope_per_hour([samples[i].at for i in half], [tree[i] / MIB for i in half]), 1
    )
    figures["rss_mib_per_minute"] = [
        round(s.rss_bytes / MIB, 1) for s in samples[:: max(1, 60 // INTERVAL_SECONDS)]
    ]
    figures["tree_rss_mib_with_job_worker"] = series([t / MIB for t in tree])
    figures["fds_all"] = series([s.fds for s in samples])
    figures["fds_after_warm_up"] = series(fds)
    figures["threads_all"] = series([s.threads for s in samples])
    figures["threads_after_warm_up"] = series(threads)

    # --- the store: a day of polls, as written and compacted --------------------------------
    first_size, last_size = main_sizes[0][1], main_sizes[-1][1]
    per_poll = (last_size - first_size) / max(1, len(main_sizes) - 1)
    copy = tmp_path / "compacted"
    shutil.copytree(main_store, copy)
    before_files = tree_size(copy)[1]
    snapshots_before = len(Store(copy).snapshots())
    tomorrow = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)
    replaced = Store(copy).compact_closed(before=tomorrow)
    after_size, after_files = tree_size(copy)
    compacted = Store(copy)
    figures["store"] = {
        "bytes_after_first_poll": first_size,
        "bytes_at_end": last_size,
        "bytes_by_folder_at_end": {
            p.name: tree_size(p)[0] for p in sorted(main_store.iterdir()) if p.is_dir()
        },
        "files_at_end": before_files,
        "snapshots": snapshots_before,
        "bytes_per_poll": round(per_poll),
        "bytes_per_day_at_5s": round(per_poll * POLLS_PER_DAY),
        "compacted_bytes": after_size,
        "compacted_files": after_files,
        "files_replaced_by_compaction": replaced,
        "compacted_bytes_per_poll": round(after_size / max(1, snapshots_before)),
        "compacted_bytes_per_day_at_5s": round(
            after_size / max(1, snapshots_before) * POLLS_PER_DAY
        ),
    }
    write_figures("soak", figures)

    # --- the store under a one-minute retention ------------------------------------------
    housekeeping = max(INTERVAL_SECONDS, RETENTION_SECONDS / 4)
    settled = RETENTION_SECONDS + housekeeping + 2 * INTERVAL_SECONDS
    most = int(settled / (INTERVAL_SECONDS * 0.9)) + 1  # polls come up to 10% early (jitter)
    after = [k for k in kept if k[0] >= settled]
    assert len(after) >= 3, "the run was too short to see retention act"
    base_size = after[0][2]
    unretained_then = next((size for at, size in main_sizes if at >= after[0][0]), last_size)
    figures["retention"] = {
        "retention_seconds": RETENTION_SECONDS,
        "housekeeping_every_seconds": housekeeping,
        "settled_after_seconds": settled,
        "most_snapshots_allowed": most,
        "snapshots_after_settling": series([k[1] for k in after]),
        "bytes_after_settling": series([k[2] for k in after]),
        "bytes_when_settled": base_size,
        "per_minute": every_minute(kept),
        "unretained_store_bytes_same_time": unretained_then,
        "unretained_store_bytes_at_end": last_size,
        "index_reads_that_met_a_deleted_file": len(index_races),
    }
    figures["sampling_failures"] = main.beat_failures + retained.beat_failures
    write_figures("soak", figures)

    assert main_exit == 0 and kept_exit == 0, (main.stderr()[-3000:], retained.stderr()[-3000:])
    assert not figures["sampling_failures"], figures["sampling_failures"]
    # the loop waits 5 s +-10% less the poll's time; the run's start and a loaded machine
    # (the job worker's JVM starting, other work) cost some beats
    assert len(beats) >= 0.7 * SOAK_SECONDS / INTERVAL_SECONDS, len(beats)
    assert not any("unreachable" in b for b in beats), beats
    assert figures["polls_with_errors"] <= len(beats) // 20, [
        b for b in beats if "errors=0" not in b
    ]
    assert max(rss) - early_level < RSS_GROWTH_MIB, (early_level, figures["rss_mib_per_minute"])
    if SOAK_SECONDS >= LEVELS_FROM_SECONDS:
        assert late_level - early_level <= RSS_LEVEL_GROWTH_MIB, (
            early_level,
            late_level,
            figures["rss_mib_per_minute"],
        )
    assert fd_levels[1] - fd_levels[0] <= FD_GROWTH, (fd_levels, figures["fds_after_warm_up"])
    assert max(fds) - fd_levels[0] <= FD_PEAK, (fd_levels, figures["fds_after_warm_up"])
    assert thread_levels[1] - thread_levels[0] <= THREAD_GROWTH, (
        thread_levels,
        figures["threads_after_warm_up"],
    )
    assert max(threads) - thread_levels[0] <= THREAD_PEAK, figures["threads_after_warm_up"]
    assert snapshots_before == len(compacted.snapshots())
    assert compacted.read_latest("topics").num_rows >= TOPICS
    assert max(k[1] for k in after) <= most, figures["retention"]
    third = max(1, len(after) // 3)
    early, late = [k[2] for k in after[:third]], [k[2] for k in after[-third:]]
    assert sum(late) / len(late) <= RETAINED_SLACK * sum(early) / len(early), figures["retention"]
    assert last_size > 1.5 * RETAINED_SLACK * unretained_then, "the other store kept growing"
