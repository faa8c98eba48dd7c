"""Canonical JSON and digests: golden vectors pin the serialisation; ids change with content."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib

import pydantic
import pytest

from pulsar_lens.core.digest import cache_key, canonical_json, digest, snapshot_id
from pulsar_lens.core.model import ConsumerRecord, EndpointError, Snapshot, TopicRecord

T0 = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)


def golden_snapshot() -> Snapshot:
    return Snapshot(
        cluster="standalone",
        collected_at=T0,
        topics=(
            TopicRecord(
                topic="persistent://public/default/orders",
                tenant="public",
                namespace="public/default",
                backlog_size=42,
            ),
        ),
        consumers=(
            ConsumerRecord(
                topic="persistent://public/default/orders",
                subscription="sub",
                consumer_name="c0",
                hash_ranges=((0, 32767), (32768, 65535)),
            ),
        ),
        durations={"topics": 0.5},
        requests=3,
    )


def test_canonical_json_sorts_keys_compactly_in_utf8() -> None:
    assert canonical_json({"b": 1, "a": [1.5, None, True], "é": "ü"}) == (
        '{"a":[1.5,null,true],"b":1,"é":"ü"}'
    )


def test_canonical_json_writes_utc_iso_timestamps() -> None:
    plus_one = dt.timezone(dt.timedelta(hours=1))
    assert canonical_json(dt.datetime(2026, 11, 21, 13, 0, tzinfo=plus_one)) == (
        '"2026-11-21T12:00:00.000000Z"'
    )
    assert canonical_json(dt.date(2026, 11, 21)) == '"2026-11-21"'


def test_canonical_json_rejects_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="naive"):
        canonical_json(dt.datetime(2026, 11, 21, 12, 0))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_canonical_json_rejects_non_finite_floats(value: float) -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": value})


@pytest.mark.parametrize("value", [{1: "a"}, b"bytes", {1, 2}, object()])
def test_canonical_json_rejects_values_without_one_spelling(value: object) -> None:
    with pytest.raises(TypeError):
        canonical_json(value)


def test_canonical_json_writes_tuples_as_arrays() -> None:
    assert canonical_json(((1, 2), [3])) == "[[1,2],[3]]"


def test_canonical_json_writes_dataclasses_without_none_fields() -> None:
    record = TopicRecord(
        topic="persistent://public/default/x", tenant="public", namespace="public/default"
    )
    assert canonical_json(record) == (
        '{"namespace":"public/default","partition_index":-1,"persistent":true,'
        '"tenant":"public","topic":"persistent://public/default/x"}'
    )


def test_canonical_json_dumps_pydantic_models_with_our_timestamps() -> None:
    class Params(pydantic.BaseModel):
        top_n: int = 10
        since: dt.datetime = T0

    assert canonical_json(Params()) == '{"since":"2026-11-21T12:00:00.000000Z","top_n":10}'


def test_digest_is_sha256_of_the_canonical_utf8_bytes() -> None:
    expected = hashlib.sha256('{"a":[1.5,null,true],"b":1,"é":"ü"}'.encode()).hexdigest()
    assert digest({"é": "ü", "b": 1, "a": [1.5, None, True]}) == f"sha256:{expected}"


def test_digest_golden_vectors() -> None:
    assert digest({"b": 1, "a": [1.5, None, True], "é": "ü"}) == (
        "sha256:37c64df3b9173bff82588a1b092e543fdf0b8cb792538f85466bd81708525477"
    )
    assert digest("") == ("sha256:12ae32cb1ec02d01eda3581b127c1fee3b0dc53572ed6baf239721a03d82e126")


def test_snapshot_id_golden_vector() -> None:
    """`sha256t:` ids (tests/props/test_snapshot_id.py spells their input); the `sha256:` ids
    over canonical JSON before them gave this snapshot sha256:5d5b0784...4c36437e."""
    assert snapshot_id(golden_snapshot()) == (
        "sha256t:9d026ef96903909ea3354badd7f9161de4105957aa0962da15997d6a2150ae8d"
    )


def test_snapshot_id_covers_collected_at() -> None:
    later = dataclasses.replace(golden_snapshot(), collected_at=T0 + dt.timedelta(seconds=30))
    assert snapshot_id(later) != snapshot_id(golden_snapshot())


def test_snapshot_id_covers_cluster() -> None:
    other = dataclasses.replace(golden_snapshot(), cluster="other")
    assert snapshot_id(other) != snapshot_id(golden_snapshot())


def test_snapshot_id_covers_content_and_errors() -> None:
    base = golden_snapshot()
    no_topics = dataclasses.replace(base, topics=())
    failed = dataclasses.replace(base, errors=(EndpointError("GET /admin/v2/x", 500, "boom"),))
    assert len({snapshot_id(base), snapshot_id(no_topics), snapshot_id(failed)}) == 3


def test_snapshot_id_ignores_our_own_timings() -> None:
    slower = dataclasses.replace(golden_snapshot(), durations={"topics": 9.0}, requests=99)
    assert snapshot_id(slower) == snapshot_id(golden_snapshot())


def test_cache_key_golden_vector() -> None:
    key = cache_key("backlog-growth", "1.0", {"top_n": 10}, ["sha256:aa", "sha256:bb"])
    assert key == "sha256:9c929d7918d28d5c7b1634793c7fabdb692552c51d8706641526ddefee73a6eb"


def test_cache_key_changes_with_each_input() -> None:
    base = ("backlog-growth", "1.0", {"top_n": 10}, ["sha256:aa"])
    variants = [
        ("backlog-other", "1.0", {"top_n": 10}, ["sha256:aa"]),
        ("backlog-growth", "1.1", {"top_n": 10}, ["sha256:aa"]),
        ("backlog-growth", "1.0", {"top_n": 11}, ["sha256:aa"]),
        ("backlog-growth", "1.0", {"top_n": 10}, ["sha256:ab"]),
    ]
    keys = {cache_key(*base), *(cache_key(*v) for v in variants)}
    assert len(keys) == 5


def test_cache_key_accepts_a_params_model_like_its_dict() -> None:
    class Params(pydantic.BaseModel):
        top_n: int = 10

    assert cache_key("p", "1", Params(), ["sha256:aa"]) == cache_key(
        "p", "1", {"top_n": 10}, ["sha256:aa"]
    )
