"""The command line given bad input: a clear message naming the argument and a non-zero exit,
never a traceback. Every number a user can type is bounded.

`main()` runs in-process; SystemExit is caught. Commands that would start something when a
value were wrongly accepted (`demo` starts a local Pulsar) are checked at the parser only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pulsar_lens.cli.main import build_parser, main
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.limits import MAX_BUNDLES, MAX_PARTITIONS, MAX_REPLICA_POINTS
from pulsar_lens.core.store import Store
from pulsar_lens.core.topicname import parse_topic_name
from pulsar_lens.plugins.registry import discover
from tests.props.strategies import FakeAdmin, props, weird_names


def cli_props(examples: int) -> settings:
    """`props`, with capsys allowed: run_cli empties it before each example."""
    return settings(props(examples), suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass(frozen=True)
class Ran:
    code: int
    text: str  # stdout and stderr


def run_cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Ran:
    capsys.readouterr()
    handlers = list(logging.root.handlers)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse, and commands that exit with a message
        if isinstance(exc.code, str):
            print(exc.code)
            code = 1
        else:
            code = int(exc.code or 0)
    finally:  # main() logs to this example's stderr, which capsys closes afterwards
        for handler in set(logging.root.handlers) - set(handlers):
            logging.root.removeHandler(handler)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text, text
    return Ran(code, text)


def refused(ran: Ran, *names: str) -> None:
    assert ran.code != 0, ran.text
    assert any(name in ran.text for name in names), (names, ran.text)


# ---- every numeric argument, and what is too much for it ----------------------------------

DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class Numeric:
    """A numeric argument: how to call it, its flag, its largest accepted value."""

    command: tuple[str, ...]
    flag: str
    largest: float | dt.timedelta
    after: tuple[str, ...] = ()
    parse_only: bool = False  # accepting a bad value would start a cluster


DRILL = ("drill", "unload", "--bundle", "public/default/0x00000000_0x40000000")
NUMERIC = (
    Numeric(("failover", "--topic", "t", "--consumers", "a"), "--partitions", MAX_PARTITIONS),
    Numeric(("bundle", "t"), "--bundles", MAX_BUNDLES),
    Numeric(("ranges", "--consumers", "a"), "--points", MAX_REPLICA_POINTS),
    Numeric(("route", "k", "--consumers", "a"), "--points", MAX_REPLICA_POINTS),
    Numeric(("collect",), "--interval", 3650 * DAY),
    Numeric(("collect",), "--retention", 3650 * DAY),
    Numeric(("collect",), "--max-polls", 1_000_000_000),
    Numeric(("collect",), "--sample-every", 1_000_000_000),
    Numeric(("collect",), "--probe-rate", 1000.0),
    Numeric(("collect",), "--metrics-port", 65535),
    Numeric(("serve",), "--port", 65535),
    Numeric(("serve",), "--interval", 3650 * DAY),
    Numeric(("serve",), "--metrics-port", 65535),
    Numeric(("demo",), "--port", 65535, parse_only=True),
    Numeric(("demo",), "--interval", 3650 * DAY, parse_only=True),
    Numeric(("demo",), "--metrics-port", 65535, parse_only=True),
    Numeric(("demo",), "--unload-every", 3650 * DAY, parse_only=True),
    Numeric(("demo",), "--brokers", 8, parse_only=True),
    Numeric(DRILL, "--rate", 1000.0),
    Numeric(DRILL, "--timeout", 86_400.0),
    Numeric(("config", "check"), "--timeout", 300.0),
    Numeric(("analyze", "key-shared-map"), "--max-rows", 10**9),
    Numeric(("analyze", "key-shared-map"), "--max-text", 10**9),
    # a value wrongly accepted would write a store there: a folder of this run's temp dir
    Numeric(
        ("dev-store", str(Path(tempfile.gettempdir(), "lens-props-dev-store"))), "--polls", 10_000
    ),
)


def _subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subcommands(sub, (*path, name))


def _numeric(action: argparse.Action) -> bool:
    if action.type in (int, float):
        return True
    if not callable(action.type):
        return False
    try:
        value = action.type("1")
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False
    return isinstance(value, int | float | dt.timedelta) and not isinstance(value, bool)


def test_every_numeric_argument_is_in_the_table() -> None:
    """A new numeric option must be added to NUMERIC, so its bound is tested."""
    found = {
        (path[0], opt)
        for path, parser in _subcommands(build_parser())
        if path
        for action in parser._actions
        if _numeric(action)
        for opt in action.option_strings[-1:]
    }
    assert found == {(n.command[0], n.flag) for n in NUMERIC}


def _too_much(largest: float | dt.timedelta) -> st.SearchStrategy[str]:
    if isinstance(largest, dt.timedelta):
        days = int(largest / DAY)
        return st.one_of(
            st.integers(days + 1, 10**12).map(lambda d: f"{d}d"),
            st.integers(int(largest.total_seconds()) + 1).map(str),
            st.sampled_from(["0", "0s", "-1s", "1x", "nan", "inf", "1e400", "", "1h-1m"]),
        )
    whole = isinstance(largest, int)
    over = st.integers(int(largest) + 1).map(str) | st.integers(max_value=-1).map(str)
    if whole:
        junk = st.sampled_from(["1.5", "1e3", "0x10", "", " ", "nan", "9" * 5000])
    else:
        over |= st.floats(min_value=largest, exclude_min=True).map(repr)
        junk = st.sampled_from(["nan", "inf", "-inf", "0", "-0.0", "1e400", "", "x"])
    return over | junk


def flag_of(command: str, flag: str) -> Numeric:
    return next(n for n in NUMERIC if n.command[0] == command and n.flag == flag)


def check_refused(capsys: pytest.CaptureFixture[str], numeric: Numeric, value: str) -> None:
    argv = [*numeric.command, f"{numeric.flag}={value}", *numeric.after]
    if numeric.parse_only:
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and numeric.flag in err, err
        return
    refused(run_cli(capsys, argv), numeric.flag)


@cli_props(150)
@given(st.sampled_from(NUMERIC).flatmap(lambda n: st.tuples(st.just(n), _too_much(n.largest))))
@example((flag_of("drill", "--rate"), "nan")).via("drill --rate nan was accepted")
@example((flag_of("drill", "--timeout"), "-1")).via("drill --timeout -1 was accepted")
@example((flag_of("collect", "--max-polls"), "9" * 23)).via("collect --max-polls had no bound")
@example((flag_of("collect", "--probe-rate"), "nan")).via(
    "--probe-rate was checked only with --probe, after the mutations check"
)
def test_over_large_numbers_are_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str], case: tuple[Numeric, str]
) -> None:
    check_refused(capsys, *case)


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("serve", "--port", "99999"),
        ("demo", "--port", "-1"),
        ("demo", "--brokers", "100000"),
        ("config", "--timeout", "nan"),  # a traceback from urllib3 when a cluster is set
        ("config", "--timeout", "-1"),
    ],
)
def test_numbers_of_serve_demo_and_config_are_bounded(
    capsys: pytest.CaptureFixture[str], command: str, flag: str, value: str
) -> None:
    check_refused(capsys, flag_of(command, flag), value)


# ---- the model commands --------------------------------------------------------------------


def _os_could_pass(text: str) -> bool:
    """Whether a process could receive `text` in its argv (its lone surrogates, if any, are
    the \\udc80-\\udcff that stand for bytes that are not UTF-8)."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return "\0" not in text


os_text = st.binary(max_size=12).map(os.fsdecode)  # what argv holds: surrogates only \udcXX
bad_topics = st.one_of(
    os_text,
    weird_names.filter(_os_could_pass),
    st.sampled_from(["http://a/b/c", "persistent://a/b", "a/b", "persistent://a/b/ ", "x/y/z/"]),
    st.text(max_size=20),
)


def _refused_name(text: str) -> bool:
    try:
        parse_topic_name(text)
    except ValueError:
        return True
    return False


@cli_props(100)
@given(bad_topics)
@example("x-partition-" + "1" * 5000).via("a 5,000-digit partition (int() limit, a traceback)")
def test_failover_refuses_malformed_topic_names(
    capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    assume(_refused_name(topic) and not topic.startswith("-"))
    try:
        topic.encode("utf-8")
    except UnicodeEncodeError:
        refused(run_cli(capsys, ["failover", "--topic", topic, "--consumers", "a"]), "UTF-8")
        return
    refused(run_cli(capsys, ["failover", "--topic", topic, "--consumers", "a"]), "topic")
    refused(run_cli(capsys, ["bundle", "--", topic]), "topic")


@cli_props(100)
@given(
    st.one_of(
        st.tuples(st.integers(), st.integers())
        .filter(lambda r: not 0 <= r[0] <= r[1] <= 65535)
        .map(lambda r: f"{r[0]}-{r[1]}"),
        st.sampled_from(["", "-", "5", "a-b", "1-2-3", "0x1-0x2", "1.5-2", "9" * 5000 + "-1"]),
    )
)
def test_sticky_ranges_refuse_bad_ranges(capsys: pytest.CaptureFixture[str], text: str) -> None:
    ran = run_cli(capsys, ["ranges", "--selector", "sticky", "--consumers", f"a={text}"])
    refused(ran, "range", "START-END")


@cli_props(60)
@given(
    st.lists(st.integers(), min_size=1, max_size=3).filter(
        lambda xs: not all(0 <= x < 2**31 for x in xs) or len(xs) != 2
    )
    | st.lists(st.sampled_from(["", "x", "1.0", "-"]), min_size=1, max_size=2).map(tuple)
)
@example([-5, 0]).via("a negative priority level (the client refuses it) was accepted")
@example([10**22, 0]).via("a priority level beyond int32 was accepted")
def test_failover_refuses_bad_priorities(
    capsys: pytest.CaptureFixture[str], levels: list[int] | tuple[str, ...]
) -> None:
    text = ",".join(str(v) for v in levels)
    ran = run_cli(capsys, ["failover", "--topic", "t", "--consumers", "a,b", "--priorities", text])
    refused(ran, "--priorities")


@cli_props(60)
@given(
    (weird_names.filter(_os_could_pass) | os_text).filter(
        lambda n: n not in ("a", "b") and not n.startswith("-")
    )
)
def test_route_refuses_an_unknown_leaving_consumer(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assume(name.strip() == name or not name)
    ran = run_cli(capsys, ["route", "k", "--consumers", "a,b", "--leave", name])
    refused(ran, "--leave", "UTF-8")


def test_consumers_refuse_empty_names_and_too_many(capsys: pytest.CaptureFixture[str]) -> None:
    refused(run_cli(capsys, ["ranges", "--consumers", "a,,b"]), "--consumers")
    many = ",".join(f"c{i}" for i in range(20_001))
    refused(run_cli(capsys, ["ranges", "--consumers", many]), "--consumers")
    refused(run_cli(capsys, ["failover", "--topic", "t", "--consumers", many]), "--consumers")


def test_an_argument_that_is_not_utf8_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    bad = os.fsdecode(b"\xff\xfe")
    refused(run_cli(capsys, ["hash", bad]), "argument 2 is not valid UTF-8")


# ---- a store folder of garbage, and unknown subscriptions -------------------------------------

TABLES = ("snapshots", "topics", "subscriptions", "consumers", "brokers")
DAY_DIR = "date=2026-11-26"
FILE_NAME = "20261126T120000000000Z-20261126T120000000000Z-{}.parquet"


@st.composite
def garbage(draw: st.DrawFn) -> list[tuple[str, bytes | None]]:
    """Files for a store folder: (relative path, bytes; None for a folder)."""
    items = []
    for _ in range(draw(st.integers(1, 5))):
        table = draw(st.sampled_from(TABLES))
        tag = draw(st.sampled_from(["0123456789abcdef", "compact", "a"]))
        where = draw(
            st.sampled_from(
                [f"{table}/{DAY_DIR}/{FILE_NAME.format(tag)}", f"{table}/x.parquet", table]
            )
        )
        content = draw(
            st.none() | st.just(b"") | st.binary(max_size=64) | st.just(b"PAR1" + b"\0" * 8)
        )
        items.append((where, content))
    return items


def _lay_out(root: Path, items: list[tuple[str, bytes | None]]) -> None:
    for where, content in items:
        path = root / where
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if content is not None and path.is_dir():  # a file where a folder is
                shutil.rmtree(path)
            if content is None:
                path.mkdir()
            else:
                path.write_bytes(content)
        except (FileExistsError, NotADirectoryError):
            continue  # an earlier item put a file or folder in the way


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one snapshot polled from the recorded 4.0.7 answers."""
    root = tmp_path_factory.mktemp("store")
    Store(root).write(poll(FakeAdmin.recorded("default"), concurrency=1))  # type: ignore[arg-type]
    return root


@cli_props(20)
@given(garbage(), st.booleans())
@example([("snapshots", b"")], False).via("a file where the index folder is (a traceback)")
@example([("topics", b"\0")], True).via("a file where a table's folder is (a traceback)")
@example([(f"snapshots/{DAY_DIR}/{FILE_NAME.format('0123456789abcdef')}", None)], True).via(
    "a folder where a file is"
)
def test_analyze_over_a_store_of_garbage_is_clear(
    capsys: pytest.CaptureFixture[str], good_store: Path, items: list[Any], with_snapshot: bool
) -> None:
    """Random bytes named *.parquet, empty files, folders where files should be: the store
    sets aside the files that are not its own and goes on; what it cannot go on with (no
    snapshot at all, a file where it keeps a folder) is said, with exit 1."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "store"
        if with_snapshot:
            shutil.copytree(good_store, root)
        root.mkdir(exist_ok=True)
        _lay_out(root, items)
        ran = run_cli(capsys, ["analyze", "bundle-ownership", "--store", str(root), "--json"])
    if with_snapshot and ran.code == 0:
        return
    refused(ran, "no snapshots yet", "cannot read the store")


def test_analyze_with_a_file_for_a_store_is_clear(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    store.write_bytes(b"not a folder")
    ran = run_cli(capsys, ["analyze", "bundle-ownership", "--store", str(store)])
    refused(ran, f"the store {store} is not a folder")


@pytest.mark.parametrize("slug", ["key-shared-map", "failover-assignment", "sticky-ranges"])
def test_an_unknown_subscription_is_refused(
    capsys: pytest.CaptureFixture[str], good_store: Path, slug: str
) -> None:
    argv = ["analyze", slug, "--store", str(good_store), "--param", "subscription=nope"]
    refused(run_cli(capsys, argv), "subscription='nope'")


def test_every_plugin_size_is_bounded(capsys: pytest.CaptureFixture[str], good_store: Path) -> None:
    """Every number a plugin's Params takes has a maximum, and `--param` past it is refused
    naming the parameter (before any Spark job could start)."""
    unbounded = []
    for loaded in discover():
        schema = type(loaded.plugin).Params.model_json_schema()
        numbers = {
            name: prop
            for name, prop in schema.get("properties", {}).items()
            if prop.get("type") in ("integer", "number")
        }
        unbounded += [
            f"{loaded.name}.{name}"
            for name, prop in numbers.items()
            if "maximum" not in prop and "exclusiveMaximum" not in prop
        ]
        bounded = [n for n, p in numbers.items() if "maximum" in p or "exclusiveMaximum" in p]
        for name in bounded[:1]:
            argv = ["analyze", loaded.name, "--store", str(good_store), "--param", f"{name}=1e30"]
            refused(run_cli(capsys, argv), name)
    assert unbounded == []
