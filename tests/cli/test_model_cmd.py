"""`pulsar-lens hash|ranges|route`: the JSON shapes are a contract."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from cli import model_cmd
from cli.main import COMMAND_MODULES, main

GOLDEN: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "data" / "hashes.json").read_text()
)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="pulsar-lens")
    model_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().out


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    code, out = run([*argv, "--json"], capsys)
    assert code == 0
    return json.loads(out)


def test_model_cmd_is_registered_in_main() -> None:
    assert "cli.model_cmd" in COMMAND_MODULES


def test_hash_json_maps_each_key_to_its_hash(capsys: pytest.CaptureFixture[str]) -> None:
    expected = GOLDEN["sticky_hash_4_0_consistent"]["hashes"]
    assert run_json(["hash", *expected], capsys) == expected


def test_hash_json_honours_selector_and_line(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_json(["hash", "--selector", "auto-split", "--pulsar", "3.0", "9", "Zoë"], capsys)
    assert list(got) == ["9", "Zoë"] and all(0 <= v < 65536 for v in got.values())
    assert run_json(["hash", "--pulsar", "3.0", "9"], capsys)["9"] > 65535


def test_ranges_json_is_keyhashrangearrays_per_consumer(capsys: pytest.CaptureFixture[str]) -> None:
    case = GOLDEN["consistent_4_0_docs_nine_points"]
    got = run_json(["ranges", "--points", "9", "--consumers", "c1,c2"], capsys)
    assert got == case["ranges"]
    assert list(got) == ["c1", "c2"]


def test_ranges_json_keys_repeated_names_by_index(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_json(["ranges", "--points", "3", "--consumers", "dup,solo,dup"], capsys)
    assert list(got) == ["dup#0", "solo", "dup#1"]
    assert all(isinstance(r, list) and len(r) == 2 for rs in got.values() for r in rs)


def test_ranges_json_auto_split_matches_pulsar_vector(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_json(["ranges", "--selector", "auto-split", "--consumers", "c1,c2,c3"], capsys)
    assert got == {"c1": [[32769, 65536]], "c2": [[16385, 32768]], "c3": [[0, 16384]]}


def test_ranges_json_sticky_and_legacy_variants(capsys: pytest.CaptureFixture[str]) -> None:
    sticky = ["ranges", "--selector", "sticky", "--consumers", "a=0-99+200-300,b=100-150"]
    assert run_json(sticky, capsys) == {"a": [[0, 99], [200, 300]], "b": [[100, 150]]}
    case = GOLDEN["consistent_3_0_0_three_points"]
    legacy = [
        "ranges",
        "--variant",
        "3.0.0",
        "--points",
        "3",
        "--consumers",
        "consumer1,consumer2,consumer3",
    ]
    assert run_json(legacy, capsys) == case["ranges"]


def test_route_json_names_the_receiving_consumer(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_json(["route", "--points", "9", "--consumers", "c1,c2", "9", "4", "0"], capsys)
    assert got == {"9": "c2", "4": "c2", "0": "c1"}


def test_route_json_sticky_gap_is_null(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_json(["route", "--selector", "sticky", "--consumers", "a=0-1", "k1"], capsys)
    assert got == {"k1": None}


def test_route_plain_output_is_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["route", "--points", "9", "--consumers", "c1,c2", "9"], capsys)
    assert code == 0 and out.split() == ["KEY", "CONSUMER", "9", "c2"]


def test_sticky_conflict_exits_2_with_the_broker_wording(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["ranges", "--selector", "sticky", "--consumers", "a=0-99,b=50-150"])
    assert code == 2
    assert "Range conflict with consumer Consumer{consumerName=a}" in capsys.readouterr().err


def test_clashing_index_keys_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ranges", "--consumers", "a,a,a#0", "--json"]) == 2
    assert "clash" in capsys.readouterr().err
