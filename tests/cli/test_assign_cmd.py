"""`pulsar-lens failover` and `pulsar-lens bundle`: the JSON shapes are a contract."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pulsar_lens.cli import assign_cmd
from pulsar_lens.cli.main import COMMAND_MODULES, main
from pulsar_lens.core.errors import ModelError
from tests.crcforge import forge_name

ORDERS = "persistent://public/default/orders"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="pulsar-lens")
    assign_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_assign_cmd_is_registered_in_main(capsys: pytest.CaptureFixture[str]) -> None:
    assert "pulsar_lens.cli.assign_cmd" in COMMAND_MODULES
    topic = "persistent://public/default/audit"
    assert main(["failover", "--topic", topic, "--consumers", "c1,c2,c3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {topic: "c3"}


def test_failover_json_maps_each_partition_to_a_consumer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["failover", "--topic", ORDERS, "--partitions", "4", "--consumers", "c1,c2,c3"]
    code, out, _ = run([*argv, "--priorities", "0,0,0", "--json"], capsys)
    assert code == 0
    assert json.loads(out) == {
        f"{ORDERS}-partition-0": "c1",
        f"{ORDERS}-partition-1": "c2",
        f"{ORDERS}-partition-2": "c3",
        f"{ORDERS}-partition-3": "c1",
    }


def test_failover_json_consistent_hashing(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["failover", "--topic", ORDERS, "--partitions", "4", "--consumers", "c1,c2,c3"]
    code, out, _ = run([*argv, "--consistent", "--json"], capsys)
    assert code == 0
    assert json.loads(out) == {
        f"{ORDERS}-partition-0": "c2",
        f"{ORDERS}-partition-1": "c2",
        f"{ORDERS}-partition-2": "c3",
        f"{ORDERS}-partition-3": "c1",
    }


def test_failover_priorities_keep_backups_idle(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["failover", "--topic", ORDERS, "--partitions", "3", "--consumers", "main,backup"]
    code, out, _ = run([*argv, "--priorities", "0,1", "--json"], capsys)
    assert code == 0
    assert set(json.loads(out).values()) == {"main"}


def test_failover_multi_topic_keys_each_topic(capsys: pytest.CaptureFixture[str]) -> None:
    topics = ["persistent://public/default/audit", "persistent://public/default/billing"]
    argv = ["failover", "--topic", topics[0], "--topic", topics[1], "--consumers", "c1,c2,c3"]
    code, out, _ = run([*argv, "--json"], capsys)
    assert code == 0
    assert json.loads(out) == {topics[0]: "c3", topics[1]: "c2"}


def test_failover_table_lists_topic_and_consumer(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["failover", "--topic", ORDERS, "--partitions", "2", "--consumers", "c1,c2"], capsys
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["TOPIC", "ACTIVE", "CONSUMER"]
    assert lines[1].split() == [f"{ORDERS}-partition-0", "c1"]


def test_failover_compare_json_lists_moved_partitions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["failover", "--topic", ORDERS, "--partitions", "4", "--consumers", "c1,c2,c3"]
    code, out, _ = run([*argv, "--compare", "--json"], capsys)
    result = json.loads(out)
    assert code == 0
    assert result["moved"] == [f"{ORDERS}-partition-0"]
    assert result["modulo"][f"{ORDERS}-partition-0"] == "c1"
    assert result["consistent"][f"{ORDERS}-partition-0"] == "c2"


def test_failover_rejects_mismatched_priorities(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ModelError, match="2 levels for 3 consumers"):
        run(["failover", "--topic", ORDERS, "--consumers", "a,b,c", "--priorities", "0,1"], capsys)


def test_failover_error_exits_2_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["failover", "--topic", ORDERS, "--consumers", "a,,b"]) == 2
    assert "non-empty names" in capsys.readouterr().err


def test_bundle_json_maps_each_topic_to_a_bundle(capsys: pytest.CaptureFixture[str]) -> None:
    low = forge_name("persistent://public/default/low-", 0x3FFFFFFF)
    edge = forge_name("persistent://public/default/edge-", 0x40000000)
    code, out, _ = run(["bundle", low, edge, "--json"], capsys)
    assert code == 0
    assert json.loads(out) == {low: "0x00000000_0x40000000", edge: "0x40000000_0x80000000"}


def test_bundle_json_with_bundle_count(capsys: pytest.CaptureFixture[str]) -> None:
    edge = forge_name("persistent://public/default/edge-", 0x55555555)
    code, out, _ = run(["bundle", "--bundles", "3", edge, "--json"], capsys)
    assert code == 0
    assert json.loads(out) == {edge: "0x55555555_0xaaaaaaaa"}


def test_bundle_reads_boundaries_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bounds = tmp_path / "bundles.json"
    bounds.write_text(
        json.dumps({"boundaries": ["0x00000000", "0x10000000", "0xffffffff"], "numBundles": 2})
    )
    edge = forge_name("persistent://public/default/edge-", 0x10000000)
    code, out, _ = run(["bundle", "--boundaries", str(bounds), edge, "--json"], capsys)
    assert code == 0
    assert json.loads(out) == {edge: "0x10000000_0xffffffff"}


def test_bundle_unplaceable_topic_is_null_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    top = forge_name("persistent://public/default/top-", 0xFFFFFFFF)
    code, out, err = run(["bundle", top, "--json"], capsys)
    assert code == 1
    assert json.loads(out) == {top: None}
    assert "0xffffffff" in err


def test_bundle_table_lists_topic_and_bundle(capsys: pytest.CaptureFixture[str]) -> None:
    edge = forge_name("persistent://public/default/edge-", 0xC0000000)
    code, out, _ = run(["bundle", edge], capsys)
    assert code == 0
    assert out.splitlines()[1].split() == [edge, "0xc0000000_0xffffffff"]


def test_failover_jvm_charset_changes_ring_for_non_ascii(
    capsys: pytest.CaptureFixture[str],
) -> None:
    topics = [f"persistent://public/default/charset-{i}" for i in range(20)]
    argv = ["failover", *(a for t in topics for a in ("--topic", t)), "--consumers", "é,ü"]
    _, utf8, _ = run([*argv, "--json"], capsys)
    _, ascii_, _ = run([*argv, "--jvm-charset", "US-ASCII", "--json"], capsys)
    assert set(json.loads(utf8).values()) == {"é", "ü"}
    assert set(json.loads(ascii_).values()) == {"ü"}


def test_failover_rejects_unknown_charset(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run(["failover", "--topic", ORDERS, "--consumers", "a", "--jvm-charset", "nope"], capsys)
    assert exited.value.code == 2
    assert "unknown charset 'nope'" in capsys.readouterr().err


def test_bundle_reads_topic_names_as_the_broker_does(capsys: pytest.CaptureFixture[str]) -> None:
    from pulsar_lens.cli.main import main

    assert (
        main(["bundle", "--json", "PERSISTENT://public/default/x", "persistent://public/default/x"])
        == 0
    )
    placed = json.loads(capsys.readouterr().out)
    assert len(set(map(str, placed.values()))) == 1  # the domain is lower-cased before hashing


@pytest.mark.parametrize(
    ("topic", "reason"),
    [
        ("foo://public/default/x", "Invalid topic domain: 'foo'"),
        ("persistent://public/default/", "Topic local name must not be blank"),
        ("persistent://public/default/x/", "Topic local name must not be blank"),
        ("persistent://public/def ault/x", "Invalid named entity: def ault"),
    ],
)
def test_bundle_refuses_names_the_broker_refuses(
    topic: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pulsar_lens.cli.main import main

    assert main(["bundle", topic]) == 1  # the others are still placed; this one is named
    assert reason in capsys.readouterr().err
