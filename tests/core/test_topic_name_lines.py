"""How each broker line reads topic names, where 4.2 differs from 4.0 (the whole of it is
driven against each release's own `TopicName` in tests/jvm/test_topic_names.py), and which
reading and which models a broker's version gets."""

from __future__ import annotations

import re

import pytest

from pulsar_lens.core.pulsarvalues import model_line
from pulsar_lens.core.topicname import TopicNameError, parse_topic_name, topic_name_line


@pytest.mark.parametrize(
    ("version", "names", "models"),
    [
        ("3.0.7", "3.0", "3.0"),
        ("3.0", "3.0", "3.0"),
        ("4.0.7", "4.0", "4.0"),
        ("4.2.4", "4.2", "4.0"),
        ("4.3.0", "4.2", "4.0"),
        ("3.3.1", "4.0", "4.0"),
        ("", "4.0", "4.0"),
        ("unknown", "4.0", "4.0"),
    ],
)
def test_a_version_gets_its_reading_and_its_models(version: str, names: str, models: str) -> None:
    assert (topic_name_line(version), model_line(version)) == (names, models)


def test_4_2_keeps_a_full_name_as_written() -> None:
    parsed = parse_topic_name("PERSISTENT://public/default/x", pulsar="4.2")
    assert (parsed.topic, parsed.domain, parsed.namespace) == (
        "PERSISTENT://public/default/x",
        "persistent",
        "public/default",
    )
    assert (
        parse_topic_name("PERSISTENT://public/default/x").topic == "persistent://public/default/x"
    )
    assert parse_topic_name("t/ns/x-partition-2", pulsar="4.2").partitioned_topic == (
        "persistent://t/ns/x"
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("persistent://t/c/ns/x", "V1 topic names (with cluster component) are no longer"),
        ("persistent://public/default/a/b", "V1 topic names"),
        ("persistent://t//x", "Invalid topic name t//x"),
        ("-partition--1//", "Invalid topic name -partition--1//"),
        ("persistent://t/ns", "Invalid topic name persistent://t/ns"),
        ("persistent://t/ns/ ", "Topic local name must not be blank."),
        ("foo://t/ns/x", "Invalid topic domain: 'foo'"),
    ],
)
def test_4_2_refuses_what_4_0_reads_otherwise(name: str, message: str) -> None:
    with pytest.raises(TopicNameError, match=re.escape(message)):
        parse_topic_name(name, pulsar="4.2")
