"""pulsar_lens.core.errors: errors carry fields, and what a plugin raised carries its file, line
and traceback as text; nothing needs to read a message to know what an error is about."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pulsar_lens.core import configfile
from pulsar_lens.core.bundles import parse_bundle_name
from pulsar_lens.core.errors import (
    AdminApiError,
    AdminApiUnreachable,
    LocalPulsarError,
    ModelError,
    Origin,
    PluginLoadError,
    PluginRunError,
    PulsarLensError,
    SettingProblem,
    SettingsError,
    SnapshotError,
    origin_of,
)
from pulsar_lens.core.secrets import forget, register
from pulsar_lens.core.storeroot import check_root
from pulsar_lens.lab.processes import wait_until


def _outer() -> None:
    _inner()


def _inner() -> None:
    raise ValueError("bad value")


def _raised(call: object) -> BaseException:
    with pytest.raises(Exception) as info:
        call()  # type: ignore[operator]
    return info.value


def test_the_origin_names_the_innermost_frame_and_the_whole_traceback() -> None:
    origin = origin_of(_raised(_outer))
    line = inspect.getsourcelines(_inner)[1] + 1
    assert (origin.kind, origin.message) == ("ValueError", "bad value")
    assert (origin.file, origin.line) == (__file__, line)
    assert origin.where == f"{__file__}:{line}"
    assert str(origin) == f"ValueError: bad value (at {__file__}:{line})"
    assert origin.traceback.startswith("Traceback (most recent call last):")
    assert f'File "{__file__}", line {line}, in _inner' in origin.traceback
    assert origin.traceback.endswith("ValueError: bad value\n")


def test_the_origin_is_taken_in_the_plugins_home_when_the_error_is_raised_outside() -> None:
    """A plugin that calls a library which raises: its own line is the one to show, and the
    frames before its first one (the product's, which called it) are left out."""
    plugin = "/plugins/fake.py"
    namespace = {"library": _inner}
    exec(compile("def analyze():\n    library()\n", plugin, "exec"), namespace)
    exc = _raised(lambda: namespace["analyze"]())  # type: ignore[operator]
    origin = origin_of(exc, home=plugin)
    assert (origin.file, origin.line) == (plugin, 2)
    assert origin.traceback.count('File "') == 2  # analyze, then the library: nothing before
    assert origin.traceback.index(plugin) < origin.traceback.index(__file__)
    elsewhere = origin_of(exc, home="/somewhere/else")  # no frame there: the innermost one
    assert (elsewhere.file, elsewhere.line) == (__file__, inspect.getsourcelines(_inner)[1] + 1)
    assert elsewhere.traceback.count('File "') == 4  # _raised, the lambda, analyze, library


def test_a_syntax_error_is_located_in_the_file_that_did_not_compile() -> None:
    exc = _raised(lambda: compile("x = (\n", "/plugins/broken.py", "exec"))
    origin = origin_of(exc, home="/plugins/broken.py")
    assert (origin.kind, origin.file, origin.line) == ("SyntaxError", "/plugins/broken.py", 1)
    assert 'File "/plugins/broken.py", line 1' in origin.traceback
    assert __file__ not in origin.traceback  # none of the frames that compiled it


def test_a_plugin_run_error_keeps_its_fields_and_reads_as_one_line() -> None:
    origin = origin_of(_raised(_outer))
    error = PluginRunError("zero", f"analyze raised {origin}", phase="analyze", origin=origin)
    assert isinstance(error, PulsarLensError)
    assert (error.plugin, error.phase, error.limit, error.origin) == (
        "zero",
        "analyze",
        None,
        origin,
    )
    assert error.detail == f"analyze raised {origin}"
    assert str(error) == f"plugin 'zero' failed: analyze raised {origin}"
    assert "\n" not in str(error)
    limited = PluginRunError("hog", "analyze ran out", phase="analyze", limit="PULSAR_LENS_X")
    assert limited.limit == "PULSAR_LENS_X" and limited.origin is None


def test_a_stored_failure_reads_back_with_the_same_fields() -> None:
    origin = origin_of(_raised(_outer))
    error = PluginRunError("zero", f"render raised {origin}", phase="render", origin=origin)
    again = PluginRunError.from_json(error.to_json(), analysed_at="2026-01-01T00:00:00+00:00")
    assert (again.plugin, again.phase, again.detail, again.origin) == (
        "zero",
        "render",
        error.detail,
        origin,
    )
    assert str(again) == (f"{error} (when this snapshot was analysed at 2026-01-01T00:00:00+00:00)")
    assert pickle.loads(pickle.dumps(origin)) == origin  # it crosses to the parent process


def test_a_load_error_keeps_source_and_message_apart() -> None:
    error = PluginLoadError("/plugins/x.py", "import failed: boom", plugin="x")
    assert (error.source, error.message, error.plugin, error.phase) == (
        "/plugins/x.py",
        "import failed: boom",
        "x",
        "import",
    )
    assert str(error) == "plugin 'x' from /plugins/x.py: import failed: boom"


def test_what_a_plugin_raised_is_redacted_message_and_traceback_alike() -> None:
    secret = "MRKerr+Aa1/Bb~2>>?"
    register(secret)
    try:
        origin = Origin("RuntimeError", f"token {secret}", "/p.py", 3, f"Tb\n  {secret}\n")
        error = PluginRunError("leaky", f"analyze raised {origin}", origin=origin)
        stored = PluginRunError.from_json(error.to_json())
        for text in (str(error), error.detail, repr(error.to_json()), str(stored)):
            assert secret not in text
        assert error.origin is not None and secret not in error.origin.traceback
        assert secret not in error.origin.message
    finally:
        forget(secret)


# --- the other errors: what their raisers know, in fields, the text as before ---------------


def test_a_settings_file_problem_names_its_file_line_and_key(tmp_path: Path) -> None:
    config = tmp_path / "lens.toml"
    config.write_text('poll_interval = "30s"\nretention = "soon"\n')
    with pytest.raises(SettingsError) as caught:
        configfile.load({}, config=config)
    error = caught.value
    assert (error.file, error.line, error.key, error.setting) == ("lens.toml", 2, "retention", None)
    assert (
        error.problem is not None and str(error) == f"lens.toml line 2, retention: {error.problem}"
    )
    assert error.problems == (SettingProblem(error.problem, None, "lens.toml", 2, "retention"),)


def test_a_settings_problem_of_the_environment_names_its_variable() -> None:
    with pytest.raises(SettingsError) as caught:
        configfile.load({"PULSAR_LENS_RETENTION": "soon"})
    assert caught.value.setting == "PULSAR_LENS_RETENTION"
    assert str(caught.value) == f"PULSAR_LENS_RETENTION: {caught.value.problem}"
    assert caught.value.file is None and caught.value.line is None


def test_a_store_that_cannot_be_one_is_named_by_path(tmp_path: Path) -> None:
    plain = tmp_path / "a-file"
    plain.write_text("")
    with pytest.raises(SnapshotError) as caught:
        check_root(plain, writable=False)
    assert caught.value.path == plain
    assert str(caught.value).startswith(f"the store {plain} is not a folder")


def test_a_refused_bundle_names_the_model_field_and_value() -> None:
    with pytest.raises(ModelError) as caught:
        parse_bundle_name("0x0_nothex")
    assert (caught.value.model, caught.value.field, caught.value.value) == (
        "bundles",
        "bundle",
        "0x0_nothex",
    )
    assert str(caught.value) == "bad bundle name '0x0_nothex'; expected 0x%08x_0x%08x"


def test_an_admin_error_is_its_endpoint_then_its_detail() -> None:
    error = AdminApiError("GET", "/admin/v2/brokers", 503, "busy", "try later")
    assert error.endpoint == "GET /admin/v2/brokers"
    assert error.detail == "returned 503: busy; try later"
    assert str(error) == "GET /admin/v2/brokers returned 503: busy; try later"
    unreachable = AdminApiUnreachable("GET", "/admin/v2/clusters", "connection refused")
    assert unreachable.status is None and unreachable.endpoint == "GET /admin/v2/clusters"
    assert str(unreachable) == (
        "GET /admin/v2/clusters could not reach the admin API: connection refused"
    )


def test_a_local_pulsar_that_exits_while_starting_names_process_pid_and_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULSAR_LENS_CACHE_DIR", str(tmp_path / "cache"))
    log_path = tmp_path / "broker.log"
    log_path.write_text("the end\n")
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    with pytest.raises(LocalPulsarError) as caught:
        wait_until(
            lambda: False,
            process,
            deadline=time.monotonic() + 60,
            name="broker-0",
            late="never",
            tail=lambda: "the end",
            log_path=log_path,
            port=8080,
        )
    error = caught.value
    assert (error.process, error.pid, error.port) == ("broker-0", process.pid, 8080)
    kept = error.log_path  # the log goes with the data directory: a copy is kept
    assert kept is not None and kept.parent == tmp_path / "cache" / "kept-logs"
    assert kept.read_text() == "the end\n" and error.exit_code == 3
    said = f"broker-0 exited with code 3 while starting; whole log: {kept}; log tail:\nthe end"
    assert str(error) == said
