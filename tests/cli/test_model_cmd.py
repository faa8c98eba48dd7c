"""`pulsar-lens hash|ranges|route`: the JSON shapes are a contract."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.cli import model_cmd
from pulsar_lens.cli.main import COMMAND_MODULES, main

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
    assert "pulsar_lens.cli.model_cmd" in COMMAND_MODULES


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


# --- input that used to end in a traceback or run unbounded ---------------------------------


def test_non_utf8_arguments_are_a_usage_error_for_every_model_command() -> None:
    import os
    import subprocess
    import sys

    from tests.lens_cli import ROOT

    bad = os.fsdecode(b"k\xff")
    for argv in (
        ["hash", bad],
        ["route", "--consumers", "a", bad],
        ["failover", "--topic", f"persistent://public/default/{bad}", "--consumers", "a"],
        ["bundle", f"persistent://public/default/{bad}"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "pulsar_lens.cli.main", *argv],
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
        err = done.stderr.decode()
        assert done.returncode == 2 and "is not valid UTF-8" in err, err
        assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["ranges", "--points", "1000000000", "--consumers", "a"], "--points takes 1 to 1,024"),
        (["ranges", "--points", "0", "--consumers", "a"], "--points takes 1 to 1,024"),
        (
            ["failover", "--topic", "t", "--partitions", "1000000000", "--consumers", "a"],
            "--partitions takes 0 to 65,536",
        ),
        (["bundle", "--bundles", "1000000000", "t"], "--bundles takes 1 to 65,536"),
    ],
)
def test_sizes_beyond_the_limits_are_usage_errors(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert expected in capsys.readouterr().err


def test_sticky_ranges_beyond_the_hash_space_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["ranges", "--selector", "sticky", "--consumers", "a=0-99999999999999999999"])
    assert code == 2
    assert "both from 0 to 65535" in capsys.readouterr().err


def test_too_many_consumers_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    many = ",".join(f"c{i}" for i in range(20_001))
    assert main(["ranges", "--consumers", many]) == 2
    assert "the model takes 20000" in capsys.readouterr().err


# --- one charset setting, and consumers leaving ---------------------------------------------


def test_ranges_and_route_hash_names_in_the_jvm_charset(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    utf8 = run_json(["ranges", "--consumers", "é1,é2", "--json"], capsys)
    ascii_ = run_json(
        ["ranges", "--consumers", "é1,é2", "--jvm-charset", "US-ASCII", "--json"], capsys
    )
    as_java = run_json(["ranges", "--consumers", "?1,?2", "--json"], capsys)
    assert ascii_ != utf8
    assert list(ascii_.values()) == list(as_java.values())  # 'é' is '?' to a US-ASCII JVM
    monkeypatch.setattr("pulsar_lens.core.parts._charset", "US-ASCII")  # the setting
    assert run_json(["ranges", "--consumers", "é1,é2", "--json"], capsys) == ascii_
    keys = ["k1", "k2", "k3", "k4"]
    routed = run_json(["route", "--consumers", "é1,é2", *keys, "--json"], capsys)
    monkeypatch.setattr("pulsar_lens.core.parts._charset", "")
    assert routed == run_json(
        ["route", "--consumers", "é1,é2", "--jvm-charset", "US-ASCII", *keys, "--json"], capsys
    )


def test_a_consumer_leaving_gives_its_hashes_back_like_it_never_joined(
    capsys: pytest.CaptureFixture[str],
) -> None:
    left = run_json(["ranges", "--consumers", "a,b,c", "--leave", "b", "--json"], capsys)
    never = run_json(["ranges", "--consumers", "a,c", "--json"], capsys)
    assert left == never
    routed = run_json(["route", "--consumers", "a,b", "--leave", "a", "k1", "k2", "--json"], capsys)
    assert set(routed.values()) == {"b"}
    split = run_json(
        ["ranges", "--selector", "auto-split", "--consumers", "a,b,c", "--leave", "c", "--json"],
        capsys,
    )
    assert set(split) == {"a", "b"}
    assert sum(end - start + 1 for rs in split.values() for start, end in rs) == 65537


def test_leaving_names_one_of_several_same_named_consumers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert set(run_json(["ranges", "--consumers", "a,a", "--leave", "a#0", "--json"], capsys)) == {
        "a#1"
    }
    assert main(["ranges", "--consumers", "a", "--leave", "zed"]) == 2
    assert "no such consumer is connected; connected: a" in capsys.readouterr().err
