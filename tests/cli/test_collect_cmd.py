"""`pulsar-lens collect` with a fake snapshot source: exit codes, heartbeats, settings."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from pulsar_lens.cli.collect_cmd import Source
from pulsar_lens.cli.main import build_parser, main
from pulsar_lens.collectors.health import read_health
from pulsar_lens.core.model import EndpointError, Snapshot
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import free_port
from pulsar_lens.plugins.precompute import ResultsWorker
from tests.core.snapshots import make_snapshot, unreachable_snapshot


class FakeSource:
    """Builds a Source whose poll returns make(now); remembers how it was asked for."""

    def __init__(self, make: Callable[[dt.datetime], Snapshot] = lambda at: make_snapshot(at=at)):
        self.make = make
        self.calls: list[tuple[str, Sequence[str] | None]] = []
        self.closed = False

    def __call__(self, admin_url: str, namespaces: Sequence[str] | None) -> Source:
        self.calls.append((admin_url, namespaces))
        return Source(poll=lambda: self.make(dt.datetime.now(dt.UTC)), close=self.close)

    def close(self) -> None:
        self.closed = True


def parse(*argv: str, source: FakeSource) -> argparse.Namespace:
    args = build_parser().parse_args(["collect", *argv])
    args.source_factory = source
    return args


def test_collect_once_stores_a_snapshot_and_prints_its_heartbeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = FakeSource()
    args = parse(
        "--once", "--admin-url", "http://broker:8080", "--store", str(tmp_path), source=source
    )
    assert args.func(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("poll ") and " topics=3 subs=3 requests=9 errors=0 " in lines[0]
    assert Store(tmp_path).latest_snapshot_id() is not None
    assert source.calls == [("http://broker:8080", None)]
    assert source.closed


def test_collect_once_writes_its_results_pass_into_the_health_file(tmp_path: Path) -> None:
    started = dt.datetime.now(dt.UTC)
    args = parse(
        "--once", "--admin-url", "http://broker:8080", "--store", str(tmp_path), source=FakeSource()
    )
    assert args.func(args) == 0
    report = read_health(tmp_path)
    assert report is not None and report.analyses is not None
    progress = report.analyses
    assert (progress.passes, progress.skipped, progress.skipped_total) == (1, 0, 0)
    assert progress.seconds > 0
    assert progress.finished_at is not None and started <= progress.finished_at


def test_collect_without_an_admin_url_exits_2_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["collect", "--once", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no admin URL" in err and "PULSAR_ADMIN_URL" in err


def test_collect_once_unreachable_exits_1_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = FakeSource(lambda at: unreachable_snapshot(at=at))
    args = parse(
        "--once", "--admin-url", "http://broker:8080", "--store", str(tmp_path), source=source
    )
    assert args.func(args) == 1
    captured = capsys.readouterr()
    said = "unreachable first_error: GET /admin/v2/clusters: connection refused"
    assert captured.out.rstrip().endswith(said)
    assert (
        "could not reach the admin API at http://broker:8080 "
        "(GET /admin/v2/clusters: connection refused)" in captured.err
    )
    assert Store(tmp_path).latest_snapshot_id() is None


def test_collect_once_refused_credentials_say_so_not_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = EndpointError(
        endpoint="GET /admin/v2/clusters",
        status=401,
        message="returned 401: the token was refused; check PULSAR_ADMIN_TOKEN",
    )
    source = FakeSource(
        lambda at: Snapshot(cluster="standalone", collected_at=at, errors=(refused,), requests=1)
    )
    args = parse(
        "--once", "--admin-url", "http://broker:8080", "--store", str(tmp_path), source=source
    )
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert "the admin API at http://broker:8080 refused the credentials" in err
    assert "could not reach" not in err and "broker is up" not in err


def test_collect_reads_the_admin_url_and_store_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULSAR_ADMIN_URL", "http://from-env:8080")
    monkeypatch.setenv("PULSAR_LENS_STORE", str(tmp_path / "env-store"))
    source = FakeSource()
    args = parse("--once", source=source)
    assert args.func(args) == 0
    assert source.calls[0][0] == "http://from-env:8080"
    assert Store(tmp_path / "env-store").latest_snapshot_id() is not None


def test_collect_interval_prints_one_heartbeat_per_poll(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = FakeSource()
    args = parse(
        "--interval",
        "10ms",
        "--max-polls",
        "3",
        "--admin-url",
        "http://b:8080",
        "--store",
        str(tmp_path),
        source=source,
    )
    assert args.func(args) == 0
    captured = capsys.readouterr()
    assert len([line for line in captured.out.splitlines() if line.startswith("poll ")]) == 3
    assert "every 10ms" in captured.err
    assert len(Store(tmp_path).snapshots()) == 3


def test_collect_passes_namespaces_to_the_source(tmp_path: Path) -> None:
    source = FakeSource()
    args = parse(
        "--once",
        "--admin-url",
        "http://b:8080",
        "--store",
        str(tmp_path),
        "--namespace",
        "public/default",
        "--namespace",
        "acme/orders",
        source=source,
    )
    args.func(args)
    assert source.calls == [("http://b:8080", ["public/default", "acme/orders"])]


@pytest.mark.parametrize(
    "argv",
    [
        ["--interval", "soon"],
        ["--interval", "0s"],
        ["--once", "--interval", "30s"],
        ["--max-polls", "0"],
        ["--retention", "forever"],
    ],
)
def test_collect_rejects_bad_arguments_with_usage_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["collect", *argv])
    assert exc.value.code == 2
    assert "collect" in capsys.readouterr().err


def test_collect_stops_between_polls_on_sigterm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    polls: list[dt.datetime] = []

    def make(at: dt.datetime) -> Snapshot:
        polls.append(at)
        if len(polls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # what `docker stop` sends
        return make_snapshot(at=at)

    args = parse(
        "--interval",
        "10ms",
        "--admin-url",
        "http://b:8080",
        "--store",
        str(tmp_path),
        source=FakeSource(make),
    )
    assert args.func(args) == 0
    assert len(polls) == 2
    assert len(Store(tmp_path).snapshots()) == 2
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_collect_stops_on_sigterm_while_a_bounded_run_stores_its_last_analyses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--max-polls` waits for the last poll's analyses under the SIGTERM handler: a stop
    signal then ends the wait and the process exits 0, instead of the default action."""
    drain = ResultsWorker.drain
    signalled: list[bool] = []

    def drain_after_sigterm(self: ResultsWorker, timeout: float | None = None) -> bool:
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, "no handler while draining"
        os.kill(os.getpid(), signal.SIGTERM)  # what `docker stop` sends
        signalled.append(True)
        return drain(self, timeout)

    monkeypatch.setattr(ResultsWorker, "drain", drain_after_sigterm)
    args = parse(
        "--max-polls",
        "1",
        "--admin-url",
        "http://b:8080",
        "--store",
        str(tmp_path),
        source=FakeSource(lambda at: make_snapshot(at=at)),
    )
    assert args.func(args) == 0
    assert signalled == [True]
    assert len(Store(tmp_path).snapshots()) == 1
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_collect_once_against_a_closed_port_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert main(["collect", "--once", "--admin-url", url, "--store", str(tmp_path / "s")]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("poll ") and " unreachable first_error: GET " in captured.out
    assert f"could not reach the admin API at {url}" in captured.err
    assert not (tmp_path / "s").exists()


def test_collect_names_a_malformed_setting_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULSAR_LENS_RETENTION", "a week")
    assert (
        main(["collect", "--once", "--admin-url", "http://b:8080", "--store", str(tmp_path)]) == 2
    )
    assert "PULSAR_LENS_RETENTION" in capsys.readouterr().err


def test_collect_never_prints_a_password_from_the_admin_url() -> None:
    from tests.lens_cli import run_lens

    port = free_port()
    url = f"http://admin:PW-kept-quiet@127.0.0.1:{port}"
    done = run_lens("collect", "--once", env={"PULSAR_ADMIN_URL": url}, timeout=60)
    assert done.returncode == 1
    assert f"http://127.0.0.1:{port}" in done.stderr
    assert "PW-kept-quiet" not in done.stderr + done.stdout


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("ftp://broker:8080", "must start with http:// or https://"),
        ("http://broker:0", "has port 0"),
        ("http://[::1", "is not a valid URL"),
    ],
)
def test_collect_refuses_admin_urls_that_cannot_work(url: str, expected: str) -> None:
    from tests.lens_cli import run_lens

    for done in (
        run_lens("collect", "--once", "--admin-url", url),
        run_lens("collect", "--once", env={"PULSAR_ADMIN_URL": url}),
    ):
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("retention", ["1ms", "59s"])
def test_collect_refuses_a_retention_that_would_delete_what_it_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], retention: str
) -> None:
    source = FakeSource()
    argv = ("--once", "--admin-url", "http://b:8080", "--store", str(tmp_path))
    args = parse(*argv, "--retention", retention, source=source)
    assert args.func(args) == 2
    assert "--retention must be at least 1m" in capsys.readouterr().err
    assert source.calls == [] and Store(tmp_path).latest_snapshot_id() is None


def test_collect_refuses_a_retention_below_the_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("--admin-url", "http://b:8080", "--store", str(tmp_path), "--interval", "10m")
    args = parse(*argv, "--retention", "5m", source=FakeSource())
    assert args.func(args) == 2
    assert "at least the poll interval (10m)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"PULSAR_LENS_RETENTION": "999999999999d"}, "longer than the limit of 3650d"),
        ({"PULSAR_LENS_POLL_INTERVAL": "999999999999d"}, "longer than the limit of 3650d"),
        ({"PULSAR_LENS_RETENTION": "1ms"}, "PULSAR_LENS_RETENTION must be at least 1m"),
    ],
)
def test_collect_duration_settings_out_of_range_are_clear_errors(
    env: dict[str, str], expected: str
) -> None:
    from tests.lens_cli import run_lens

    done = run_lens("collect", "--once", "--admin-url", "http://127.0.0.1:1", env=env)
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_collect_duration_flag_out_of_range_is_a_usage_error() -> None:
    from tests.lens_cli import run_lens

    done = run_lens("collect", "--interval", "999999999999d", "--admin-url", "http://h:1")
    assert done.returncode == 2 and "longer than the limit of 3650d" in done.stderr


def test_a_retention_from_the_settings_is_named_as_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A flag's interval longer than the default retention: the message names the setting the
    retention came from, not a flag nobody gave."""
    source = FakeSource()
    argv = ("--max-polls", "1", "--admin-url", "http://b:8080", "--store", str(tmp_path))
    args = parse(*argv, "--interval", "8d", source=source)
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "PULSAR_LENS_RETENTION must be at least the poll interval (8d)" in err, err
    assert "--retention" not in err and source.calls == []
