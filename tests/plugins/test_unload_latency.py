"""Outages from probe rows, as `unload-latency` defines them, on hand-made rows."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from pulsar_lens.plugins.builtin.shared.outages import probe_outages
from pulsar_lens.plugins.builtin.unload_latency.outages import ladder, rung_of, timeline

T0 = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)


def rows(publish: list[float | None], *, every_ms: int = 100) -> pd.DataFrame:
    """One probe run: message i sent at i*every_ms, acked publish[i] ms later (None: never)."""
    sent = [T0 + dt.timedelta(milliseconds=i * every_ms) for i in range(len(publish))]
    acked = [
        s + dt.timedelta(milliseconds=p) if p is not None else None
        for s, p in zip(sent, publish, strict=True)
    ]
    return pd.DataFrame(
        {
            "probe": "p",
            "topic": "persistent://public/default/probe",
            "namespace": "public/default",
            "bundle": "0x00000000_0x40000000",
            "seq": range(len(publish)),
            "sent_at": pd.to_datetime(sent, utc=True),
            "acked_at": pd.to_datetime(acked, utc=True),
            "publish_ms": [float("nan") if p is None else float(p) for p in publish],
            "received": 1,
            "error": None,
        }
    )


def test_no_slow_message_no_outage() -> None:
    assert probe_outages(rows([3.0, 4.0, 49.0, 5.0])).empty


def test_an_outage_runs_from_the_last_good_ack_to_the_first_ack_after_the_cut() -> None:
    # sent at 0,100,...; messages 2..4 queued until 700 ms, when all three are acked
    frame = rows([3.0, 3.0, 500.0, 400.0, 300.0, 3.0])
    (outage,) = probe_outages(frame).itertuples()
    assert (outage.first_seq, outage.last_seq, outage.delayed) == (2, 4, 3)
    assert outage.cut_at == frame["acked_at"][1]  # 103 ms
    assert outage.back_at == frame["acked_at"][4]  # 700 ms: the first ack after the cut
    assert outage.outage_ms == 597.0
    assert outage.worst_publish_ms == 500.0


def test_an_unacked_message_is_part_of_the_outage_and_a_lost_one_is_counted() -> None:
    frame = rows([3.0, None, 250.0, 3.0])
    frame.loc[1, "received"] = 0
    (outage,) = probe_outages(frame).itertuples()
    assert (outage.first_seq, outage.last_seq, outage.lost) == (1, 2, 1)


def test_rungs_follow_the_clients_ladder() -> None:
    assert rung_of(0.0) == 0
    assert rung_of(90.0) == 1
    assert rung_of(250.0) == 2
    assert rung_of(float("nan")) is None
    counts = ladder(probe_outages(rows([3.0, 500.0, 3.0]))).set_index("rung")["outages"]
    assert counts.sum() == 1


def test_timeline_buckets_per_second() -> None:
    points = timeline(rows([3.0] * 25))
    assert list(points["messages"]) == [10, 10, 5]
    assert (points["max_ms"] == 3.0).all()


def test_a_first_assignment_is_no_unload_but_an_acquire_after_an_unload_is() -> None:
    from pulsar_lens.plugins.builtin.unload_latency.outages import unload_events

    def event(seconds: int, kind: str, before: str | None, after: str | None) -> dict[str, object]:
        return {
            "at": pd.Timestamp(T0 + dt.timedelta(seconds=seconds)),
            "kind": kind,
            "namespace": "public/default",
            "bundle": "0x00000000_0x40000000",
            "before": before,
            "after": after,
            "detail": "",
            "source": "snapshots",
        }

    ownership = pd.DataFrame(
        [
            event(10, "acquired", None, "a:8080"),  # nobody owned it before: not an unload
            event(20, "unloaded", "a:8080", None),
            event(30, "acquired", None, "b:8080"),  # after an unload: the end of a move
        ]
    )
    polls = pd.DataFrame({"collected_at": [T0 + dt.timedelta(seconds=s) for s in (0, 10, 20, 30)]})
    empty = rows([])
    events = unload_events(ownership, polls, empty, probe_outages(empty))
    assert list(events["kind"]) == ["acquired", "unloaded"]
    assert events["to_broker"].iloc[0] == "b:8080" and pd.isna(events["to_broker"].iloc[1])
    assert events["outage_ms"].isna().all()  # not probed: not measured


def test_unloads_the_load_manager_counted_and_no_poll_saw_are_events() -> None:
    """Two unloads counted in the window (10 s, 20 s]: one explains an outage no owner change
    explains (by the load manager); the other is an event of its own, bundle unknown."""
    from pulsar_lens.plugins.builtin.unload_latency.outages import unload_events

    probe = rows([2.0] * 110 + [400.0] + [2.0] * 20)  # the cut lands at 11 s
    windows = pd.DataFrame(
        {
            "at": [pd.Timestamp(T0 + dt.timedelta(seconds=20))],
            "since": [pd.Timestamp(T0 + dt.timedelta(seconds=10))],
            "broker": ["a:8080"],
            "unloaded": [2],
            "split": [0],
            "unseen": [2],
        }
    )
    polls = pd.DataFrame({"collected_at": [T0 + dt.timedelta(seconds=s) for s in (0, 10, 20)]})
    ownership = pd.DataFrame(columns=["at", "kind", "namespace", "bundle", "before", "after"])
    events = unload_events(ownership, polls, probe, probe_outages(probe), windows)
    assert list(events["kind"]) == ["counted", "outage"]
    assert list(events["by"]) == ["load manager", "load manager"]
    assert pd.isna(events["bundle"].iloc[0]) and events["bundle"].iloc[1] == "0x00000000_0x40000000"
    assert "a:8080 counted an unload no poll saw" in events["detail"].iloc[0]
    assert events["since"].iloc[0] == pd.Timestamp(T0 + dt.timedelta(seconds=10))


def test_an_outage_outside_any_counted_window_names_nobody() -> None:
    from pulsar_lens.plugins.builtin.unload_latency.outages import unload_events

    probe = rows([2.0] * 10 + [400.0] + [2.0] * 5)
    polls = pd.DataFrame({"collected_at": [T0, T0 + dt.timedelta(seconds=10)]})
    ownership = pd.DataFrame(columns=["at", "kind", "namespace", "bundle", "before", "after"])
    events = unload_events(ownership, polls, probe, probe_outages(probe))
    assert list(events["kind"]) == ["outage"] and events["by"].isna().all()
