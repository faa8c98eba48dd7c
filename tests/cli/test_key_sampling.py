"""`pulsar-lens collect` key sampling options, with a fake snapshot source and a fake sampler."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.cli.collect_cmd import Source
from pulsar_lens.cli.main import build_parser, main
from pulsar_lens.collectors.keys import TopicSample
from pulsar_lens.core.model import KeySampleRecord
from pulsar_lens.core.store import Store
from tests.core.snapshots import make_snapshot


class FakeCollect:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], dict[str, Any]]] = []

    def __call__(self, service_url: str, topics: Iterable[str], **kwargs: Any) -> list[TopicSample]:
        names = list(topics)
        self.calls.append((service_url, names, kwargs))
        return [TopicSample(t, (KeySampleRecord(t, "k", 7),), 1) for t in names]


def parse(*argv: str, collect: FakeCollect) -> argparse.Namespace:
    args = build_parser().parse_args(["collect", "--once", "--admin-url", "http://b:8080", *argv])
    args.source_factory = lambda url, namespaces: Source(
        poll=lambda: make_snapshot(at=dt.datetime.now(dt.UTC), topics=2)
    )
    args.key_collect = collect
    return args


def test_collect_sample_keys_stores_samples_with_the_snapshot(tmp_path: Path) -> None:
    collect = FakeCollect()
    args = parse(
        "--store",
        str(tmp_path),
        "--sample-keys",
        "--service-url",
        "pulsar://b:6650",
        collect=collect,
    )
    assert args.func(args) == 0
    store = Store(tmp_path)
    rows = store.read_latest("key_samples").to_pylist()
    assert len(rows) == 2 and {r["snapshot_id"] for r in rows} == {store.latest_snapshot_id()}
    assert collect.calls[0][0] == "pulsar://b:6650"


def test_collect_without_sampling_reads_no_keys(tmp_path: Path) -> None:
    collect = FakeCollect()
    args = parse("--store", str(tmp_path), collect=collect)
    assert args.func(args) == 0
    assert collect.calls == [] and Store(tmp_path).read("key_samples").num_rows == 0


def test_collect_samples_when_the_setting_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULSAR_LENS_KEY_SAMPLING", "1")
    monkeypatch.setenv("PULSAR_SERVICE_URL", "pulsar://env:6650")
    monkeypatch.setenv("PULSAR_CLIENT_TOKEN", "tok")
    collect = FakeCollect()
    args = parse("--store", str(tmp_path), "--sample-topics", "*/t1", collect=collect)
    assert args.func(args) == 0
    url, topics, kwargs = collect.calls[0]
    assert url == "pulsar://env:6650" and topics == ["persistent://public/default/t1"]
    assert kwargs["token"].reveal() == "tok"


def test_collect_with_a_malformed_sampling_setting_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULSAR_LENS_KEY_SAMPLING", "maybe")
    code = main(["collect", "--once", "--admin-url", "http://127.0.0.1:9"])
    assert code == 2 and "PULSAR_LENS_KEY_SAMPLING" in capsys.readouterr().err


def test_collect_sample_every_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["collect", "--sample-every", "0"])
    assert "positive" in capsys.readouterr().err
